package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// logModel is the simple version the log is checked against: the batches from the log start, in
// order, with their bytes.
type logModel struct {
	batches []storedBatch
	start   int64
	end     int64
}

func (m *logModel) add(batches []storedBatch) {
	m.batches = append(m.batches, batches...)
	m.end = batches[len(batches)-1].last + 1
}

// holding returns the index of the batch holding offset.
func (m *logModel) holding(offset int64) int {
	return sort.Search(len(m.batches), func(i int) bool { return m.batches[i].last >= offset })
}

// truncate mirrors Log.Truncate.
func (m *logModel) truncate(offset int64) {
	if offset >= m.end {
		return
	}
	i := m.holding(offset)
	m.end = m.batches[i].base
	m.batches = m.batches[:i]
}

// dropBefore mirrors retention moving the log start to start.
func (m *logModel) dropBefore(start int64) {
	i := sort.Search(len(m.batches), func(i int) bool { return m.batches[i].base >= start })
	m.batches = m.batches[i:]
	m.start = start
}

// segmentOf returns, for each model batch, the index of the log segment holding it.
func segmentOf(batches []storedBatch, bases []int64) []int {
	out := make([]int, len(batches))
	for i, b := range batches {
		out[i] = sort.Search(len(bases), func(k int) bool { return bases[k] > b.base }) - 1
	}
	return out
}

// checkRead checks one Read against the model and the KIP-74 rules: the range starts at the batch
// holding offset, holds whole batches only, at least one unless that batch reaches upTo, none at or
// beyond upTo, stays within maxBytes after the first batch and within one segment, and is as long as
// those rules allow.
func checkRead(t *testing.T, l *Log, m *logModel, offset, maxBytes, upTo int64) {
	t.Helper()
	got, err := l.Read(offset, maxBytes, upTo, nil)
	if offset < m.start || offset > m.end {
		if !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read(%d) outside [%d, %d]: %d bytes, %v", offset, m.start, m.end, len(got), err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Read(%d, %d, %d): %v", offset, maxBytes, upTo, err)
	}
	var want []byte
	if offset < m.end && offset < upTo {
		i := m.holding(offset)
		bases := segmentBases(l)
		segmentEnd := int64(math.MaxInt64)
		if k := sort.Search(len(bases), func(k int) bool { return bases[k] > m.batches[i].base }); k < len(bases) {
			segmentEnd = bases[k]
		}
		if m.batches[i].last < upTo {
			want = append(want, m.batches[i].raw...)
			for _, b := range m.batches[i+1:] {
				if b.base >= segmentEnd || b.last >= upTo || int64(len(want))+b.size() > maxBytes {
					break
				}
				want = append(want, b.raw...)
			}
		}
	}
	if !bytes.Equal(got, want) {
		describe := func(b []byte) string {
			var s []string
			batch.Scan(b, func(h batch.Header, _ []byte) error {
				s = append(s, fmt.Sprintf("[%d,%d]", h.BaseOffset, h.LastOffset()))
				return nil
			})
			return fmt.Sprint(len(b), " bytes ", s)
		}
		t.Fatalf("Read(%d, maxBytes %d, upTo %d) = %s, want %s (segments %v)", offset, maxBytes, upTo, describe(got), describe(want), segmentBases(l))
	}
}

// expectedRetention mirrors ApplyRetention's rule on the model's own sizes and timestamps, so that a
// segment whose size or newest timestamp the log got wrong (after recovery, say) shows up.
func expectedRetention(m *logModel, bases []int64, cfg Config) int {
	segments := segmentOf(m.batches, bases)
	size := make([]int64, len(bases))
	newest := make([]int64, len(bases))
	for i := range newest {
		newest[i] = -1
	}
	var total int64
	for i, b := range m.batches {
		size[segments[i]] += b.size()
		newest[segments[i]] = max(newest[segments[i]], b.maxTimestamp)
		total += b.size()
	}
	now := cfg.Now().UnixMilli()
	deleted := 0
	for k := 0; k < len(bases)-1; k++ {
		expired := cfg.RetentionTime >= 0 && newest[k] >= 0 && now-newest[k] > cfg.RetentionTime.Milliseconds()
		oversize := cfg.RetentionBytes >= 0 && total-size[k] >= cfg.RetentionBytes
		if !expired && !oversize {
			break
		}
		total -= size[k]
		deleted++
	}
	return deleted
}

func TestLogAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runModel(t, seed, 1000) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 77))
	gen := newBatchGen(seed)
	dir := t.TempDir()
	now := time.UnixMilli(gen.clock)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 700
	cfg.FileDeleteDelay = time.Second
	cfg.CheckpointInterval = 0
	cfg.Now = func() time.Time { return now }
	l := openLog(t, dir, cfg)
	defer func() { l.Close() }()
	m := &logModel{}
	epoch := int32(0)
	reopen := func(crash bool) {
		t.Helper()
		if crash {
			l.abandon()
		} else if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, dir, cfg)
		if l.LogStartOffset() != m.start {
			// Open starts the log at its first segment, which is where retention left it.
			t.Fatalf("reopened log starts at %d, model at %d", l.LogStartOffset(), m.start)
		}
	}
	for step := 0; step < steps; step++ {
		op := rng.IntN(100)
		switch {
		case op < 38: // append one to four batches with one call
			var raw []byte
			for n := 1 + rng.IntN(4)*rng.IntN(2); n > 0; n-- {
				raw = append(raw, gen.random()...)
			}
			if rng.IntN(4) == 0 {
				epoch++
			}
			stored, res := appendBatches(t, l, raw, epoch)
			if res.LastOffset != stored[len(stored)-1].last || res.Batches != len(stored) {
				t.Fatalf("append result %+v for %d batches ending at %d", res, len(stored), stored[len(stored)-1].last)
			}
			m.add(stored)
		case op < 62: // read
			offset := m.start - 2 + rng.Int64N(m.end-m.start+5)
			if len(m.batches) > 0 && rng.IntN(2) == 0 {
				b := m.batches[rng.IntN(len(m.batches))]
				offset = b.base + rng.Int64N(b.last-b.base+1)
			}
			maxBytes := []int64{0, 1, rng.Int64N(4 << 10), rng.Int64N(40 << 10), math.MaxInt32, math.MaxInt64}[rng.IntN(6)]
			upTo := []int64{math.MaxInt64, m.end, m.start + rng.Int64N(m.end-m.start+3)}[rng.IntN(3)]
			checkRead(t, l, m, offset, maxBytes, upTo)
		case op < 66: // find by timestamp
			checkTimestampLookups(t, l, m.batches, rng, 3)
		case op < 70: // truncate
			offset := m.start + rng.Int64N(m.end-m.start+3)
			if rng.IntN(20) == 0 {
				offset = m.start - 1
			}
			err := l.Truncate(offset)
			if offset < m.start {
				if !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("truncate below start: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("truncate to %d: %v", offset, err)
			}
			m.truncate(offset)
			if l.LogEndOffset() != m.end || l.FlushedOffset() > m.end {
				t.Fatalf("after truncate to %d (flush policy %v): end %d flushed %d, model end %d", offset, l.Config().Flush, l.LogEndOffset(), l.FlushedOffset(), m.end)
			}
		case op < 74: // roll
			before := l.SegmentCount()
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if active := l.activeSegment(); active.baseOffset != m.end || (l.SegmentCount() != before+1 && l.SegmentCount() != before) {
				t.Fatalf("roll: active segment at %d, log end %d, %d -> %d segments", active.baseOffset, m.end, before, l.SegmentCount())
			}
		case op < 79: // retention
			now = now.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
			c := l.Config()
			c.RetentionBytes, c.RetentionTime = -1, -1
			switch rng.IntN(3) {
			case 0:
				c.RetentionBytes = rng.Int64N(l.Size() + 1)
			case 1:
				c.RetentionTime = time.Duration(rng.Int64N(int64(5 * time.Second)))
			}
			if err := l.SetConfig(c); err != nil {
				t.Fatal(err)
			}
			bases := segmentBases(l)
			want := expectedRetention(m, bases, c)
			deleted, err := l.ApplyRetention()
			if err != nil || deleted != want {
				t.Fatalf("retention (bytes %d, time %v) over segments %v: deleted %d, %v; want %d", c.RetentionBytes, c.RetentionTime, bases, deleted, err, want)
			}
			if l.SegmentCount() != len(bases)-deleted || l.LogStartOffset() != bases[deleted] {
				t.Fatalf("after retention: %d segments, start %d; segments were %v", l.SegmentCount(), l.LogStartOffset(), bases)
			}
			m.dropBefore(bases[deleted])
			if _, err := l.Read(m.start-1, 1, math.MaxInt64, nil); m.start > 0 && !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read below start %d: %v", m.start, err)
			}
		case op < 83: // reconfigure
			c := l.Config()
			c.SegmentBytes = []int64{4 << 10, 16 << 10, 64 << 10}[rng.IntN(3)]
			c.IndexIntervalBytes = []int64{1, 300, 700, 4096}[rng.IntN(4)]
			c.MaxIndexEntries = []int{2, 5, 1000}[rng.IntN(3)]
			c.Preallocate = rng.IntN(4) != 0
			c.Flush = []FlushPolicy{FlushByOS, FlushByOS, FlushOnAppend, FlushOnInterval}[rng.IntN(4)]
			c.FlushInterval = time.Millisecond
			c.SegmentAge = []time.Duration{0, 0, 2 * time.Second}[rng.IntN(3)]
			if err := l.SetConfig(c); err != nil {
				t.Fatal(err)
			}
			cfg = c
		case op < 88: // wait for durability
			if m.end > m.start {
				target := m.start + rng.Int64N(m.end-m.start)
				if err := l.WaitFlushed(context.Background(), target); err != nil {
					t.Fatal(err)
				}
				if l.FlushedOffset() <= target {
					t.Fatalf("WaitFlushed(%d) returned with flushed offset %d", target, l.FlushedOffset())
				}
			}
		case op < 92:
			reopen(false)
		case op < 96:
			reopen(true)
		default: // crash, then lose an unflushed tail of the active segment
			l.abandon()
			flushed := l.FlushedOffset()
			active := l.activeSegment()
			position, cutFrom := int64(0), int64(-1)
			type placed struct {
				end  int64
				last int64
			}
			var ends []placed
			for _, b := range m.batches {
				if b.base < active.baseOffset {
					continue
				}
				if b.base >= flushed && cutFrom < 0 {
					cutFrom = position
				}
				position += b.size()
				ends = append(ends, placed{position, b.last})
			}
			if cutFrom < 0 {
				cutFrom = position
			}
			cut := cutFrom + rng.Int64N(position-cutFrom+200)
			if st, err := os.Stat(active.dataPath); err != nil {
				t.Fatal(err)
			} else if cut < st.Size() {
				if err := os.Truncate(active.dataPath, cut); err != nil {
					t.Fatal(err)
				}
			}
			keepEnd := active.baseOffset
			for _, e := range ends {
				if e.end <= cut {
					keepEnd = e.last + 1
				}
			}
			m.truncate(keepEnd)
			l = openLog(t, dir, cfg)
			if l.LogEndOffset() < flushed {
				t.Fatalf("recovery lost flushed data: end %d, flushed was %d", l.LogEndOffset(), flushed)
			}
		}
		if l.LogEndOffset() != m.end || l.LogStartOffset() != m.start {
			t.Fatalf("step %d (op %d): log [%d, %d), model [%d, %d)", step, op, l.LogStartOffset(), l.LogEndOffset(), m.start, m.end)
		}
		if step%100 == 99 {
			checkBatches(t, l, m.batches)
		}
	}
	checkBatches(t, l, m.batches)
	checkTimestampLookups(t, l, m.batches, rng, 50)
	reopen(true)
	checkBatches(t, l, m.batches)
	checkTimestampLookups(t, l, m.batches, rng, 50)
}
