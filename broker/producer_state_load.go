package broker

// Rebuilding a partition's producer state from the tail of its log, so that a batch retried across a
// broker restart is still recognised as a duplicate. The batch header carries everything the rules
// need (producer id, epoch, base sequence, last offset delta) and the log assigned the offsets, so
// replaying the headers of the last batches in log order gives the state the broker had for them.
//
// Only a bounded tail is read (about producerTailBytes, and always whole batches up to the log end):
// the log has no backwards walk and no producer snapshot yet. Producers whose last batches lie before
// that tail stay unknown and start over with their next batch, as without any rebuild. The rebuild
// runs once per partition, at its first idempotent append, under producers.mu: no idempotent append
// can land meanwhile, and plain appends that do cannot change producer state.

import (
	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/segment"
)

// producerTailBytes bounds the log tail read to rebuild producer state (plus at most one batch).
const producerTailBytes = 1 << 20

// loadLocked rebuilds the state from the log's tail, once. On a read error (the log failed, or
// retention raced the read) nothing is replayed and every producer is unknown.
func (s *producerStates) loadLocked(log *segment.Log) {
	if s.mu.loaded {
		return
	}
	s.mu.loaded = true
	tail, err := readLogTail(log, producerTailBytes)
	if err != nil {
		return
	}
	batch.Scan(tail, func(h batch.Header, _ []byte) error {
		if h.ProducerID >= 0 && h.IsControl() {
			// A marker at a higher epoch fences the producer's older epochs (partition_txn.go).
			if tracked, known := s.mu.byID[h.ProducerID]; !known || h.ProducerEpoch > tracked.entry.epoch {
				s.storeLocked(h.ProducerID, producerEntry{epoch: h.ProducerEpoch})
			}
			return nil
		}
		if h.ProducerID < 0 || h.BaseSequence < 0 {
			return nil
		}
		b := batchSequence{producerID: h.ProducerID, epoch: h.ProducerEpoch, firstSequence: h.BaseSequence, lastOffsetDelta: h.LastOffsetDelta}
		var entry producerEntry
		tracked, known := s.mu.byID[h.ProducerID]
		if known {
			entry = tracked.entry
		}
		s.storeLocked(h.ProducerID, entry.withAppended(known, b, h.BaseOffset))
		return nil
	})
}

// readLogTail returns the last whole batches of log up to its current end: the longest run that ends
// at the log end and fits in about budget bytes, found by doubling how many offsets back it starts.
// The last batch is returned even when it alone is larger than budget.
func readLogTail(log *segment.Log, budget int64) ([]byte, error) {
	start, end := log.LogStartOffset(), log.LogEndOffset()
	var tail []byte
	for step := int64(1); end > start; step *= 2 {
		from := max(start, end-step)
		data, complete, err := readLogRange(log, from, end, budget)
		if err != nil {
			return nil, err
		}
		if !complete {
			break
		}
		tail = data
		if from == start {
			break
		}
	}
	return tail, nil
}

// readLogRange reads the batches holding offsets from up to end, stopping once budget bytes are read;
// complete reports whether it got to end.
func readLogRange(log *segment.Log, from, end, budget int64) (data []byte, complete bool, err error) {
	for offset := from; offset < end; {
		if int64(len(data)) >= budget {
			return data, false, nil
		}
		chunk, err := log.Read(offset, budget-int64(len(data)), end, nil)
		if err != nil {
			return nil, false, err
		}
		if len(chunk) == 0 {
			return data, false, nil // truncated meanwhile
		}
		if _, err := batch.Scan(chunk, func(h batch.Header, _ []byte) error {
			offset = h.NextOffset()
			return nil
		}); err != nil {
			return nil, false, err
		}
		data = append(data, chunk...)
	}
	return data, true, nil
}

// reset forgets every producer, so that the next idempotent append rebuilds the state from the
// log's tail: a replica that becomes leader holds batches it appended as a follower, which never
// went through the idempotence check here.
func (s *producerStates) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.byID = nil
	s.mu.loaded = false
}

// resetAll is reset plus the transaction bookkeeping (a new leader's log may differ).
func (p *partition) resetProducersAndTxns() {
	s := &p.producers
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.byID = nil
	s.mu.loaded = false
	p.resetTxnsLocked()
}
