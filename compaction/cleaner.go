package compaction

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/segment"
)

// Config configures a Cleaner.
type Config struct {
	// KeyMapBytes bounds the memory of the key map of one pass (Kafka's log.cleaner.dedupe.buffer.size).
	// A dirty section with more distinct keys than fit is cleaned over several passes.
	KeyMapBytes int64
	// Throttle bounds the cleaner's reads and writes; nil: no limit.
	Throttle *Throttle
	// ReadBytes is how much of a log one read takes.
	ReadBytes int64
}

// DefaultConfig returns a 32 MiB key map (about 1.2 million keys) and no throttle.
func DefaultConfig() Config { return Config{KeyMapBytes: 32 << 20, ReadBytes: 1 << 20} }

// Cleaner compacts logs, one pass at a time. It is used by one goroutine.
type Cleaner struct {
	config Config
	keys   *keyMap
	codecs *codecs
	out    []byte
	read   []byte
}

// NewCleaner allocates the key map and codecs.
func NewCleaner(cfg Config) (*Cleaner, error) {
	if cfg.KeyMapBytes < 1024 || cfg.ReadBytes < 1024 {
		return nil, fmt.Errorf("compaction: key map %d bytes and read size %d must be at least 1 KiB", cfg.KeyMapBytes, cfg.ReadBytes)
	}
	c, err := newCodecs()
	if err != nil {
		return nil, err
	}
	return &Cleaner{config: cfg, keys: newKeyMap(cfg.KeyMapBytes), codecs: c}, nil
}

// Close releases the codecs.
func (c *Cleaner) Close() { c.codecs.close() }

// Stats describe one pass.
type Stats struct {
	Plan Plan
	// Cleaned: the pass rewrote segments (the plan was due).
	Cleaned bool
	// CleanedUpTo is the first dirty offset after the pass (below Plan.FirstUncleanable when the key
	// map filled up).
	CleanedUpTo int64
	Segments    int   // segments rewritten
	BytesRead   int64 // of the log, both passes
	BytesIn     int64 // size of the segments rewritten
	BytesOut    int64 // size of what replaced them
	Duration    time.Duration
}

// Reclaimed is the disk the pass freed.
func (s Stats) Reclaimed() int64 { return s.BytesIn - s.BytesOut }

// Inspect returns the plan a pass over l would follow now, without cleaning (for metrics).
func Inspect(l *segment.Log, policy Policy, now time.Time, stable int64) Plan {
	return PlanCleaning(l.Segments(), l.LogStartOffset(), readCheckpoint(l.Dir()).firstDirty, stable, policy, now)
}

// Clean runs one pass over l when the policy says it is due: it builds the key map over the dirty
// section, then rewrites every sealed segment from the log start through the end of that section,
// keeping per key only its latest record (and tombstones until their delete retention passed), and
// records how far it cleaned. The active segment is never touched, nor any segment holding offsets at
// or after stable (see PlanCleaning).
func (c *Cleaner) Clean(ctx context.Context, l *segment.Log, policy Policy, now time.Time, stable int64) (Stats, error) {
	started := time.Now()
	cp := readCheckpoint(l.Dir())
	if end := l.LogEndOffset(); cp.firstDirty > end {
		cp.firstDirty = end // truncated below the last pass
	}
	segments := l.Segments()
	plan := PlanCleaning(segments, l.LogStartOffset(), cp.firstDirty, stable, policy, now)
	stats := Stats{Plan: plan, CleanedUpTo: plan.FirstDirty}
	if !plan.Due {
		return stats, nil
	}
	end, lastBatches, err := c.buildKeyMap(ctx, l, plan.FirstDirty, plan.FirstUncleanable, &stats)
	if err != nil {
		return stats, err
	}
	f := filter{cleaner: c, keys: c.keys, checkpoint: cp, firstDirty: plan.FirstDirty, lastBatches: lastBatches,
		nowMs: now.UnixMilli(), deleteRetention: policy.DeleteRetention.Milliseconds()}
	for _, g := range groupSegments(segments, l.LogStartOffset(), end, l.Config().SegmentBytes) {
		if err := c.cleanGroup(ctx, l, g, &f, &stats); err != nil {
			return stats, err
		}
	}
	if err := writeCheckpoint(l.Dir(), cp.withPass(end, now, policy.DeleteRetention)); err != nil {
		return stats, err
	}
	stats.Cleaned, stats.CleanedUpTo, stats.Duration = true, end, time.Since(started)
	return stats, nil
}

// eachBatch reads [from, to) of l and calls fn with each whole batch, throttled.
func (c *Cleaner) eachBatch(ctx context.Context, l *segment.Log, from, to int64, stats *Stats, fn func(h batch.Header, raw []byte) error) error {
	for offset := from; offset < to; {
		raw, err := l.Read(offset, c.config.ReadBytes, to, c.read)
		if err != nil {
			return fmt.Errorf("compaction: read %s at %d: %w", l.Dir(), offset, err)
		}
		c.read = raw[:0]
		if len(raw) == 0 {
			return fmt.Errorf("compaction: read %s at %d: nothing before %d", l.Dir(), offset, to)
		}
		stats.BytesRead += int64(len(raw))
		if err := c.config.Throttle.Wait(ctx, len(raw)); err != nil {
			return err
		}
		if _, err := batch.Scan(raw, func(h batch.Header, b []byte) error {
			offset = h.NextOffset()
			return fn(h, b)
		}); err != nil {
			return err
		}
	}
	return nil
}

// buildKeyMap fills the key map with the latest offset of each key in [from, to), stopping early
// (at a batch boundary) when the map is full. It returns where it stopped and, per producer id, the
// base offset of its last batch seen.
func (c *Cleaner) buildKeyMap(ctx context.Context, l *segment.Log, from, to int64, stats *Stats) (int64, map[int64]int64, error) {
	c.keys.reset()
	lastBatches := map[int64]int64{}
	end := to
	errFull := errors.New("full")
	err := c.eachBatch(ctx, l, from, to, stats, func(h batch.Header, raw []byte) error {
		if h.IsControl() || h.IsTransactional() {
			return nil // kept whole; see the package doc
		}
		records, err := c.codecs.batchRecords(h, raw)
		if err != nil {
			return fmt.Errorf("compaction: batch at %d: %w", h.BaseOffset, err)
		}
		if err := parseRecords(records, int(h.RecordCount), func(r record) error {
			offset := h.BaseOffset + r.offsetDelta
			if r.key == nil || offset < from {
				return nil
			}
			if !c.keys.put(r.key, offset) {
				return errFull
			}
			return nil
		}); err != nil {
			if errors.Is(err, errFull) {
				end = h.BaseOffset
			}
			return err
		}
		if h.ProducerID >= 0 {
			lastBatches[h.ProducerID] = h.BaseOffset
		}
		return nil
	})
	if errors.Is(err, errFull) {
		err = nil
		if end <= from {
			return 0, nil, fmt.Errorf("compaction: %s: key map of %d keys too small for the batch at %d", l.Dir(), c.keys.capacity(), from)
		}
	}
	return end, lastBatches, err
}

// cleanGroup rewrites one group of segments.
func (c *Cleaner) cleanGroup(ctx context.Context, l *segment.Log, g group, f *filter, stats *Stats) (err error) {
	r, err := l.BeginReplace(g.base, g.end)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			r.Abort()
		}
	}()
	w := groupWriter{replacement: r, cleaner: c, ctx: ctx, stats: stats, out: c.out[:0], next: g.base}
	from := max(g.base, l.LogStartOffset())
	err = c.eachBatch(ctx, l, from, g.end, stats, func(h batch.Header, raw []byte) error {
		kept, err := f.batch(h, raw)
		if err != nil {
			return fmt.Errorf("compaction: %s: batch at %d: %w", l.Dir(), h.BaseOffset, err)
		}
		if kept == nil {
			w.drop(h)
			return nil
		}
		return w.write(h, kept)
	})
	if err == nil {
		err = w.finish(g.end)
	}
	c.out = w.out[:0]
	if err != nil {
		return err
	}
	if err := r.Commit(); err != nil {
		return err
	}
	stats.Segments++
	stats.BytesIn += g.size
	stats.BytesOut += w.written
	return nil
}

// groupWriter assembles a group's new segment: kept batches, and filler batches (no records, no
// producer) over the offsets of dropped ones, so that offsets stay dense batch to batch.
type groupWriter struct {
	replacement *segment.Replacement
	cleaner     *Cleaner
	ctx         context.Context
	stats       *Stats
	out         []byte
	next        int64 // the offset after the last batch in out (or given to the replacement)
	written     int64
	// the dropped batches since the last kept one
	gapBaseTimestamp, gapMaxTimestamp int64
	gapEpoch                          int32
	gapAny                            bool
}

func (w *groupWriter) drop(h batch.Header) {
	if !w.gapAny {
		w.gapBaseTimestamp, w.gapMaxTimestamp = h.BaseTimestamp, h.MaxTimestamp
	}
	w.gapAny = true
	w.gapMaxTimestamp = max(w.gapMaxTimestamp, h.MaxTimestamp)
	w.gapEpoch = h.PartitionLeaderEpoch
}

// fill writes a filler batch over [next, to) when that is not empty.
func (w *groupWriter) fill(to int64, h *batch.Header) {
	next := w.next
	if to <= next {
		return
	}
	if !w.gapAny && h != nil { // offsets below the log start: nothing was read of them
		w.gapBaseTimestamp, w.gapMaxTimestamp, w.gapEpoch = h.BaseTimestamp, h.BaseTimestamp, h.PartitionLeaderEpoch
	}
	w.out = appendEmptyBatch(w.out, next, int32(to-1-next), w.gapEpoch, 0, w.gapBaseTimestamp, w.gapMaxTimestamp, -1, -1, -1)
	w.gapAny = false
	w.next = to
}

func (w *groupWriter) write(h batch.Header, kept []byte) error {
	w.fill(h.BaseOffset, &h)
	w.out = append(w.out, kept...)
	w.next = h.NextOffset()
	if len(w.out) >= 1<<20 {
		return w.flush()
	}
	return nil
}

func (w *groupWriter) flush() error {
	if len(w.out) == 0 {
		return nil
	}
	if err := w.cleaner.config.Throttle.Wait(w.ctx, len(w.out)); err != nil {
		return err
	}
	if err := w.replacement.Append(w.out); err != nil {
		return err
	}
	w.written += int64(len(w.out))
	w.out = w.out[:0]
	return nil
}

func (w *groupWriter) finish(end int64) error {
	w.fill(end, nil)
	return w.flush()
}

// appendEmptyBatch appends a batch with no records over [base, base+lastOffsetDelta].
func appendEmptyBatch(dst []byte, base int64, lastOffsetDelta, epoch int32, attributes int16, baseTimestamp, maxTimestamp, producerID int64, producerEpoch int16, baseSequence int32) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(base))
	dst = binary.BigEndian.AppendUint32(dst, batch.MinBatchLength)
	dst = binary.BigEndian.AppendUint32(dst, uint32(epoch))
	dst = append(dst, 2, 0, 0, 0, 0) // magic, CRC (set below)
	dst = binary.BigEndian.AppendUint16(dst, uint16(attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(lastOffsetDelta))
	dst = binary.BigEndian.AppendUint64(dst, uint64(baseTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(maxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(producerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(producerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(baseSequence))
	dst = binary.BigEndian.AppendUint32(dst, 0) // records
	batch.SetCRC(dst[start:])
	return dst
}
