package broker

// A partition's side of transactions: which producers have a transaction open here (from their first
// transactional batch to their marker), the last stable offset (LSO) that read_committed consumers
// read below, and the aborted-transaction index (segment.TxnIndex) that their fetches list.
//
// The state is guarded by producerStates.mu, which every transactional append and every marker
// write holds, so a marker and the batches it closes are ordered. firstUnstable mirrors the
// smallest open transaction's first offset for lock-free reads by fetches.
//
// Rebuild: the state is derived from the log. It is loaded at first use (a transactional append, a
// marker, a read_committed fetch or ListOffsets) by scanning batch headers from a checkpoint
// (txn-checkpoint beside the log: an offset and the transactions open there, written by the
// transaction checker while the broker runs and at a clean shutdown, only at a durable log end) or
// from the log start without one, re-appending the
// index entries of the aborts met on the way. A stale checkpoint only lengthens the scan; one past
// the log end (the log was cut) is ignored. A new leader rebuilds too: as a follower it appended
// without this bookkeeping (producerStates.reset).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

const txnCheckpointFile = "txn-checkpoint"

// Control record types (the key of a control batch's record: version int16, type int16).
const (
	controlAbort  int16 = 0
	controlCommit int16 = 1
)

// partitionTxns is one partition's transaction bookkeeping. Fields are guarded by
// producerStates.mu except firstUnstable.
type partitionTxns struct {
	loaded bool
	// open maps a producer id to the first offset of its open transaction here.
	open map[int64]int64
	// index is the aborted-transaction index (nil until loaded).
	index *segment.TxnIndex
	// checkpointed is the log end offset of the last checkpoint written.
	checkpointed int64
	// ready mirrors loaded for lock-free reads.
	ready atomic.Bool
	// firstUnstable is min(open), or MaxInt64 with none open. Invariant: equals min(open) whenever
	// producerStates.mu is not held.
	firstUnstable atomic.Int64
}

type txnCheckpoint struct {
	Offset int64           `json:"offset"`
	Open   map[int64]int64 `json:"open"`
}

// loadTxnsLocked rebuilds the bookkeeping if needed. Called with producers.mu held.
func (p *partition) loadTxnsLocked() error {
	t := &p.producers.mu.txns
	if t.loaded {
		return nil
	}
	if t.index == nil {
		index, err := p.log.OpenTxnIndex()
		if err != nil {
			return err
		}
		t.index = index
	}
	from, open := p.log.LogStartOffset(), map[int64]int64{}
	if raw, err := os.ReadFile(filepath.Join(p.log.Dir(), txnCheckpointFile)); err == nil {
		var c txnCheckpoint
		if json.Unmarshal(raw, &c) == nil && c.Offset >= from && c.Offset <= p.log.LogEndOffset() {
			from = c.Offset
			for pid, first := range c.Open {
				open[pid] = first
			}
		}
	}
	if err := t.index.TruncateFrom(from); err != nil {
		return err
	}
	t.open = open
	if err := p.log.ScanHeaders(from, p.log.LogEndOffset(), func(h batch.Header, control []byte) error {
		p.noteBatchLocked(h, control)
		return nil
	}); err != nil {
		return fmt.Errorf("broker: rebuild transactions of %s-%d: %w", p.topic, p.index, err)
	}
	t.loaded = true
	t.ready.Store(true)
	t.checkpointed = -1
	p.updateFirstUnstableLocked()
	return nil
}

// noteBatchLocked updates the bookkeeping for one batch in the log: a transactional batch opens its
// producer's transaction, a marker closes it (an abort is indexed). raw is needed for markers only.
func (p *partition) noteBatchLocked(h batch.Header, raw []byte) {
	t := &p.producers.mu.txns
	if h.ProducerID < 0 || !h.IsTransactional() {
		return
	}
	if !h.IsControl() {
		if _, ok := t.open[h.ProducerID]; !ok {
			t.open[h.ProducerID] = h.BaseOffset
		}
		return
	}
	kind, ok := controlType(raw)
	if !ok {
		return
	}
	first, wasOpen := t.open[h.ProducerID]
	delete(t.open, h.ProducerID)
	if kind == controlAbort && wasOpen {
		stable := h.BaseOffset
		for _, f := range t.open {
			stable = min(stable, f)
		}
		t.index.Append(segment.AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: stable})
	}
}

func (p *partition) updateFirstUnstableLocked() {
	first := int64(math.MaxInt64)
	for _, f := range p.producers.mu.txns.open {
		first = min(first, f)
	}
	p.producers.mu.txns.firstUnstable.Store(first)
}

// controlType reads the type of a control batch's (first) record; ok is false when it does not parse.
func controlType(raw []byte) (int16, bool) {
	if len(raw) <= batch.HeaderSize {
		return 0, false
	}
	records := raw[batch.HeaderSize:]
	_, n := binary.Varint(records) // record length
	if n <= 0 || len(records) < n+1 {
		return 0, false
	}
	rest := records[n+1:] // skip attributes
	for range 2 {         // timestamp delta, offset delta
		_, m := binary.Varint(rest)
		if m <= 0 {
			return 0, false
		}
		rest = rest[m:]
	}
	keyLength, m := binary.Varint(rest)
	if m <= 0 || keyLength < 4 || int64(len(rest)-m) < keyLength {
		return 0, false
	}
	key := rest[m:]
	return int16(binary.BigEndian.Uint16(key[2:4])), true
}

// controlBatch builds a marker: a control batch of one record, transactional, at the producer's id
// and epoch.
func controlBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32) []byte {
	kind := controlAbort
	if commit {
		kind = controlCommit
	}
	var key [4]byte
	binary.BigEndian.PutUint16(key[2:], uint16(kind))
	var value [6]byte
	binary.BigEndian.PutUint32(value[2:], uint32(coordinatorEpoch))
	var b batch.Builder
	b.Reset(time.Now())
	b.Add(batch.Record{Key: key[:], Value: value[:]})
	b.ProducerID, b.ProducerEpoch = producerID, epoch
	raw := b.Finish()
	binary.BigEndian.PutUint16(raw[21:], batch.AttributeTransactional|batch.AttributeControl)
	batch.SetCRC(raw)
	return raw
}

// lastStableOffset is the offset read_committed consumers read below: the first offset of the
// oldest open transaction, or the high watermark.
func (p *partition) lastStableOffset() (int64, error) {
	if !p.txnsLoaded() {
		p.producers.mu.Lock()
		err := p.loadTxnsLocked()
		p.producers.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	return min(p.replica.HighWatermark(), p.producers.mu.txns.firstUnstable.Load()), nil
}

// txnsLoaded reports whether the bookkeeping is loaded (a fast path: loading checks again).
func (p *partition) txnsLoaded() bool { return p.producers.mu.txns.ready.Load() }

// resetTxnsLocked forgets the bookkeeping and its checkpoint: the log may have been truncated and
// rewritten by another leader, so the next use rescans it from the start.
func (p *partition) resetTxnsLocked() {
	t := &p.producers.mu.txns
	t.loaded = false
	t.ready.Store(false)
	t.open = nil
	os.Remove(filepath.Join(p.log.Dir(), txnCheckpointFile))
}

// abortedTransactions lists the aborted transactions overlapping [from, upTo).
func (p *partition) abortedTransactions(from, upTo int64) []segment.AbortedTxn {
	p.producers.mu.Lock()
	index := p.producers.mu.txns.index
	p.producers.mu.Unlock()
	if index == nil {
		return nil
	}
	return index.Aborted(from, upTo)
}

// writeMarker appends a commit or abort marker for a producer's transaction and returns the
// marker's offset. A marker below the producer's known epoch is refused (INVALID_PRODUCER_EPOCH:
// a stale coordinator); one above it fences the producer's older epochs.
func (p *partition) writeMarker(producerID int64, epoch int16, commit bool, coordinatorEpoch int32) (int64, error) {
	states := &p.producers
	states.mu.Lock()
	defer states.mu.Unlock()
	states.loadLocked(p.log)
	if err := p.loadTxnsLocked(); err != nil {
		return 0, err
	}
	entry, known := states.lookupLocked(producerID, nil)
	if known && epoch < entry.epoch {
		return 0, fmt.Errorf("broker: marker for producer %d epoch %d on %s-%d, which is at epoch %d: %w", producerID, epoch, p.topic, p.index, entry.epoch, protocol.InvalidProducerEpoch)
	}
	raw := controlBatch(producerID, epoch, commit, 0)
	result, err := p.replica.Append(raw)
	if err != nil {
		return 0, appendErrorCode(err)
	}
	if !known || epoch > entry.epoch {
		states.storeLocked(producerID, producerEntry{epoch: epoch})
	}
	h, _ := batch.ParseHeader(raw)
	h.BaseOffset = result.BaseOffset
	p.noteBatchLocked(h, raw)
	p.updateFirstUnstableLocked()
	return result.LastOffset, nil
}

// noteAppendedLocked records the transactional batches of an append (offsets assigned).
func (p *partition) noteAppendedLocked(pending []pendingBatch, base int64) {
	changed := false
	for _, b := range pending {
		if b.transactional {
			if _, ok := p.producers.mu.txns.open[b.sequence.producerID]; !ok {
				p.producers.mu.txns.open[b.sequence.producerID] = base + b.offsetDelta
				changed = true
			}
		}
	}
	if changed {
		p.updateFirstUnstableLocked()
	}
}

// checkpointTxns writes the checkpoint when the bookkeeping is loaded and the log moved since the
// last one; pruneTxnIndex drops index entries below the log start.
func (p *partition) checkpointTxns() error {
	states := &p.producers
	states.mu.Lock()
	defer states.mu.Unlock()
	t := &states.mu.txns
	end := p.log.LogEndOffset()
	if !t.loaded || end == t.checkpointed || p.log.FlushedOffset() < end {
		return nil // only a durable log end is a safe starting point for a rescan
	}
	if err := t.index.Prune(); err != nil {
		return err
	}
	raw, err := json.Marshal(txnCheckpoint{Offset: end, Open: t.open})
	if err != nil {
		return err
	}
	path := filepath.Join(p.log.Dir(), txnCheckpointFile)
	if err := os.WriteFile(path+".tmp", raw, 0o644); err != nil {
		return fmt.Errorf("broker: write %s: %w", path, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("broker: write %s: %w", path, err)
	}
	t.checkpointed = end
	return nil
}

// openTransactions lists the producers with a transaction open here and their first offsets.
func (p *partition) openTransactions() map[int64]int64 {
	p.producers.mu.Lock()
	defer p.producers.mu.Unlock()
	out := make(map[int64]int64, len(p.producers.mu.txns.open))
	for pid, first := range p.producers.mu.txns.open {
		out[pid] = first
	}
	return out
}

// checkpointTransactions writes, at a clean shutdown, the transaction checkpoint of every partition
// whose bookkeeping is loaded, after syncing its log (a checkpoint names only a durable log end), so
// that the next start rescans nothing.
func (b *Broker) checkpointTransactions(ctx context.Context) {
	b.registry.forEach(func(p *partition) {
		if !p.txnsLoaded() {
			return
		}
		if err := p.log.Sync(ctx); err != nil {
			return
		}
		if err := p.checkpointTxns(); err != nil {
			b.logger.Warn("transaction checkpoint", "topic", p.topic, "partition", p.index, "err", err)
		}
	})
}
