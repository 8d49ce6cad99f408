package broker

// Per-partition idempotent producer state: the entries the rules in producer_sequence.go read, and
// the lock that makes check, append and record one step for every idempotent produce to a partition.
//
// State lives in memory. After a broker restart it is rebuilt from the headers of the last batches of
// the log (about a megabyte of tail, producer_state_load.go) at the partition's first idempotent
// append, so a batch retried across the restart is still a duplicate. A producer the partition does
// not know (its batches lie before that tail, or it was evicted, see maxProducersPerPartition)
// starts its state with its next batch whatever its sequence, as Kafka does for a producer whose
// state it lost: for such a producer a retry of an old batch is appended again.

import (
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

// maxProducersPerPartition bounds the producers a partition remembers. Beyond it the least
// recently written one is forgotten (Kafka expires idle producers after producer.id.expiration.ms,
// a day, instead). A forgotten producer is unknown again: its next batch is accepted as a start.
const maxProducersPerPartition = 10_000

// producerStates is one partition's idempotent producers.
type producerStates struct {
	// mu is held from the sequence check through the log append to the state update, never across a
	// wait for durability. Lock order: after registry.mu; nothing is locked while holding it except
	// the log's own append lock (inside Append).
	mu struct {
		sync.Mutex
		byID map[int64]*trackedProducer
		// loaded is set once the state was rebuilt from the log's tail (producer_state_load.go).
		loaded bool
		// writes counts state updates; trackedProducer.lastWrite orders producers for eviction.
		writes uint64
		// txns is the partition's transaction bookkeeping (partition_txn.go).
		txns partitionTxns
	}
}

type trackedProducer struct {
	entry     producerEntry
	lastWrite uint64
}

// pendingBatch is one idempotent batch of an append being checked.
type pendingBatch struct {
	sequence    batchSequence
	offsetDelta int64 // offset of its first record relative to the append's first
	// transactional: the batch belongs to a transaction (partition_txn.go).
	transactional bool
	// entry and known are what the partition knows about the producer before this batch.
	entry producerEntry
	known bool
}

// appendRecords appends one partition's batches, applying the idempotence rules to those with a
// producer id. duplicate reports a batch the partition already holds: result then names its
// original offsets and nothing was appended.
func (p *partition) appendRecords(records []byte) (result segment.AppendResult, duplicate bool, err error) {
	var space [4]pendingBatch
	pending, err := scanBatches(records, nil, space[:0])
	if err != nil {
		return segment.AppendResult{}, false, err
	}
	return p.appendPending(records, pending)
}

// scanBatches walks the batch headers of a produce once: it calls check (when not nil) with each
// header, stopping at its first error, and collects the batches that carry a producer id. A header
// that does not parse ends the walk: Append reports it precisely.
func scanBatches(records []byte, check func(batch.Header) error, pending []pendingBatch) ([]pendingBatch, error) {
	offsetDelta := int64(0)
	for position := 0; position < len(records); {
		h, err := batch.ParseHeader(records[position:])
		if err != nil {
			break
		}
		if check != nil {
			if err := check(h); err != nil {
				return nil, err
			}
		}
		if h.ProducerID >= 0 {
			pending = append(pending, pendingBatch{
				sequence: batchSequence{
					producerID:      h.ProducerID,
					epoch:           h.ProducerEpoch,
					firstSequence:   h.BaseSequence,
					lastOffsetDelta: h.LastOffsetDelta,
				},
				offsetDelta:   offsetDelta,
				transactional: h.IsTransactional(),
			})
		}
		offsetDelta += int64(h.LastOffsetDelta) + 1
		position += h.Size()
	}
	return pending, nil
}

// appendPending appends records whose idempotent batches scanBatches collected in pending.
func (p *partition) appendPending(records []byte, pending []pendingBatch) (result segment.AppendResult, duplicate bool, err error) {
	if len(pending) == 0 {
		result, err = p.replica.Append(records)
		return result, false, err
	}

	states := &p.producers
	states.mu.Lock()
	defer states.mu.Unlock()
	states.loadLocked(p.log)
	transactional := false
	for _, b := range pending {
		transactional = transactional || b.transactional
	}
	if transactional {
		if err := p.loadTxnsLocked(); err != nil {
			return segment.AppendResult{}, false, err
		}
	}
	for i := range pending {
		b := &pending[i]
		b.entry, b.known = states.lookupLocked(b.sequence.producerID, pending[:i])
		verdict, original := checkSequence(b.entry, b.known, b.sequence)
		if verdict == sequenceDuplicate && original.baseOffset < 0 {
			// It repeats an earlier batch of this same append (offsets not yet assigned): as in
			// Kafka, only batches already in the log are duplicates; this one is out of order.
			verdict = sequenceOutOfOrder
		}
		if verdict == sequenceAppend {
			continue
		}
		// A broken batch is refused as broken, whatever its header claims.
		if _, err := batch.Scan(records, nil); err != nil {
			return segment.AppendResult{}, false, fmt.Errorf("segment: append to %s: %w", p.log.Dir(), err)
		}
		if verdict == sequenceDuplicate {
			// As Kafka, a duplicate anywhere in the append answers for the whole append.
			return segment.AppendResult{BaseOffset: original.baseOffset, LastOffset: original.lastOffset}, true, nil
		}
		return segment.AppendResult{}, false, sequenceError(verdict, b.sequence, b.entry, p)
	}
	result, err = p.replica.Append(records)
	if err != nil {
		return result, false, err
	}
	for i := range pending {
		b := &pending[i]
		b.entry = b.entry.withAppended(b.known, b.sequence, result.BaseOffset+b.offsetDelta)
		// Later batches of the same producer in this append see this one as known.
		for j := i + 1; j < len(pending); j++ {
			if pending[j].sequence.producerID == b.sequence.producerID {
				pending[j].entry, pending[j].known = b.entry, true
			}
		}
	}
	for i := range pending {
		if last := lastOfProducer(pending, i); last {
			states.storeLocked(pending[i].sequence.producerID, pending[i].entry)
		}
	}
	if transactional {
		p.noteAppendedLocked(pending, result.BaseOffset)
	}
	return result, false, nil
}

// lastOfProducer reports whether pending[i] is the last batch of its producer in pending.
func lastOfProducer(pending []pendingBatch, i int) bool {
	for _, later := range pending[i+1:] {
		if later.sequence.producerID == pending[i].sequence.producerID {
			return false
		}
	}
	return true
}

// lookupLocked finds what is known about a producer before the next batch: from an earlier batch of
// the same append if there is one (as if it were already appended), else from the state.
func (s *producerStates) lookupLocked(producerID int64, earlier []pendingBatch) (entry producerEntry, known bool) {
	for i := len(earlier) - 1; i >= 0; i-- {
		if b := earlier[i]; b.sequence.producerID == producerID {
			// Offsets are not known before the append; only sequences matter for the check.
			return b.entry.withAppended(b.known, b.sequence, -1), true
		}
	}
	tracked, ok := s.mu.byID[producerID]
	if !ok {
		return producerEntry{}, false
	}
	return tracked.entry, true
}

// storeLocked records a producer's entry after an append, evicting the least recently written
// producer when the partition remembers too many.
func (s *producerStates) storeLocked(producerID int64, entry producerEntry) {
	s.mu.writes++
	if tracked, ok := s.mu.byID[producerID]; ok {
		tracked.entry, tracked.lastWrite = entry, s.mu.writes
		return
	}
	if s.mu.byID == nil {
		s.mu.byID = map[int64]*trackedProducer{}
	}
	if len(s.mu.byID) >= maxProducersPerPartition {
		oldestID, oldest := int64(-1), uint64(0)
		for id, tracked := range s.mu.byID {
			if oldestID < 0 || tracked.lastWrite < oldest {
				oldestID, oldest = id, tracked.lastWrite
			}
		}
		delete(s.mu.byID, oldestID)
	}
	s.mu.byID[producerID] = &trackedProducer{entry: entry, lastWrite: s.mu.writes}
}

// sequenceError is the Kafka error for a refused batch.
func sequenceError(verdict sequenceVerdict, b batchSequence, known producerEntry, p *partition) error {
	where := fmt.Sprintf("broker: producer %d epoch %d on %s-%d", b.producerID, b.epoch, p.topic, p.index)
	switch verdict {
	case sequenceInvalid:
		return fmt.Errorf("%s: negative base sequence %d: %w", where, b.firstSequence, protocol.InvalidRecord)
	case sequenceFenced:
		return fmt.Errorf("%s: fenced by epoch %d: %w", where, known.epoch, protocol.InvalidProducerEpoch)
	case sequenceOutOfOrder:
		if b.epoch != known.epoch {
			return fmt.Errorf("%s: a new epoch starts at sequence 0, not %d: %w", where, b.firstSequence, protocol.OutOfOrderSequenceNumber)
		}
		return fmt.Errorf("%s: sequence %d does not follow %d: %w", where, b.firstSequence, known.last().lastSequence, protocol.OutOfOrderSequenceNumber)
	}
	panic(fmt.Sprintf("broker: no error for sequence verdict %v", verdict))
}
