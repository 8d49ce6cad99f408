package compaction

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/segment"
)

// latest is the model: per key, its last record.
type latest struct {
	offset int64
	value  []byte // nil: a tombstone
}

// producedLog appends keyed records to a real log and remembers the latest record of each key.
type producedLog struct {
	t     testing.TB
	log   *segment.Log
	model map[string]latest
	// history is every record produced, in offset order.
	history []struct {
		key string
		latest
	}
	codecs *codecs
	clock  time.Time
	rng    *rand.Rand
}

func newProducedLog(t testing.TB, segmentBytes int64) *producedLog {
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = segmentBytes
	cfg.IndexIntervalBytes = 1024
	l, err := segment.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := newCodecs()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return &producedLog{t: t, log: l, model: map[string]latest{}, codecs: c,
		clock: time.UnixMilli(1_700_000_000_000), rng: rand.New(rand.NewPCG(1, 2))}
}

// produce appends one batch of records (value nil: tombstone) compressed with codec.
func (p *producedLog) produce(codec int, keys []string, values [][]byte, producerID int64) {
	p.t.Helper()
	var b batch.Builder
	b.Reset(p.clock)
	for i, key := range keys {
		b.Add(batch.Record{Key: []byte(key), Value: values[i]})
	}
	if producerID >= 0 {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = producerID, 0, 0
	}
	raw := bytes.Clone(b.Finish())
	if codec != batch.CodecNone {
		body, err := p.codecs.compress(nil, codec, raw[batch.HeaderSize:], false)
		if err != nil {
			p.t.Fatal(err)
		}
		raw = append(raw[:batch.HeaderSize], body...)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-batch.LengthPrefix))
		binary.BigEndian.PutUint16(raw[21:], uint16(codec))
		batch.SetCRC(raw)
	}
	res, err := p.log.Append(raw, 1)
	if err != nil {
		p.t.Fatal(err)
	}
	for i, key := range keys {
		p.model[key] = latest{offset: res.BaseOffset + int64(i), value: values[i]}
		p.history = append(p.history, struct {
			key string
			latest
		}{key, p.model[key]})
	}
}

// readLog reads the whole log back: records in offset order, and checks the batch chain is dense.
func readLog(t testing.TB, l *segment.Log, c *codecs) []struct {
	offset     int64
	key, value []byte
	tombstone  bool
} {
	t.Helper()
	var out []struct {
		offset     int64
		key, value []byte
		tombstone  bool
	}
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		raw, err := l.Read(next, 1<<20, math.MaxInt64, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := batch.Scan(raw, func(h batch.Header, b []byte) error {
			if h.BaseOffset > next {
				return fmt.Errorf("gap: batch at %d after %d", h.BaseOffset, next)
			}
			next = h.NextOffset()
			records, err := c.batchRecords(h, b)
			if err != nil {
				return err
			}
			return parseRecords(records, int(h.RecordCount), func(r record) error {
				v := bytes.Clone(r.value)
				out = append(out, struct {
					offset     int64
					key, value []byte
					tombstone  bool
				}{h.BaseOffset + r.offsetDelta, bytes.Clone(r.key), v, r.tombstone})
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkCompacted verifies the log holds, below upTo, exactly the latest record of each key among
// those below upTo, in offset order, except tombstones below expiredBelow; and every record at or
// above upTo as produced.
func (p *producedLog) checkCompacted(upTo, expiredBelow int64) {
	p.t.Helper()
	want := map[string]latest{}
	var tail []int64
	for _, h := range p.history {
		if h.offset < upTo {
			want[h.key] = h.latest
		} else {
			tail = append(tail, h.offset)
		}
	}
	for key, l := range want {
		if l.value == nil && l.offset < expiredBelow {
			delete(want, key)
		}
	}
	records := readLog(p.t, p.log, p.codecs)
	seen := map[string]bool{}
	last := int64(-1)
	for _, r := range records {
		if r.offset <= last {
			p.t.Fatalf("offset %d after %d", r.offset, last)
		}
		last = r.offset
		if r.offset >= upTo {
			if len(tail) == 0 || tail[0] != r.offset {
				p.t.Fatalf("record at %d beyond the cleaned part, want %v", r.offset, tail[:min(len(tail), 1)])
			}
			tail = tail[1:]
			continue
		}
		w, ok := want[string(r.key)]
		if !ok || w.offset != r.offset {
			p.t.Fatalf("record %q at %d stayed; want %+v (present: %v)", r.key, r.offset, w, ok)
		}
		if !bytes.Equal(w.value, r.value) || (w.value == nil) != r.tombstone {
			p.t.Fatalf("record %q at %d: value %q, want %q", r.key, r.offset, r.value, w.value)
		}
		seen[string(r.key)] = true
	}
	for key, w := range want {
		if !seen[key] {
			p.t.Fatalf("key %q (latest at %d) lost", key, w.offset)
		}
	}
	if len(tail) > 0 {
		p.t.Fatalf("records from %d on lost", tail[0])
	}
}

func newTestCleaner(t testing.TB, keyMapBytes int64) *Cleaner {
	cfg := DefaultConfig()
	cfg.KeyMapBytes = keyMapBytes
	c, err := NewCleaner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestCleanKeepsLatestPerKey(t *testing.T) {
	for _, codec := range []int{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		t.Run(fmt.Sprint("codec ", codec), func(t *testing.T) {
			p := newProducedLog(t, 16<<10)
			for i := 0; i < 600; i++ {
				n := 1 + p.rng.IntN(5)
				keys, values := make([]string, n), make([][]byte, n)
				for j := range keys {
					keys[j] = fmt.Sprint("key-", p.rng.IntN(50))
					if p.rng.IntN(10) > 0 {
						values[j] = fmt.Appendf(nil, "value %d.%d %s", i, j, bytes.Repeat([]byte("x"), p.rng.IntN(100)))
					}
				}
				p.produce(codec, keys, values, int64(i%3)-1)
			}
			before := p.log.Size()
			c := newTestCleaner(t, 1<<20)
			policy := DefaultPolicy()
			policy.DeleteRetention = time.Hour
			stats, err := c.Clean(context.Background(), p.log, policy, p.clock, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			if !stats.Cleaned || stats.Segments == 0 || stats.Reclaimed() <= 0 {
				t.Fatalf("pass did nothing: %+v", stats)
			}
			uncleanable := stats.Plan.FirstUncleanable
			p.checkCompacted(uncleanable, -1)
			if after := p.log.Size(); after >= before {
				t.Fatalf("log %d bytes after cleaning, %d before", after, before)
			}
			// An hour later another pass (with more dirty data) drops the tombstones it cleaned before.
			for i := 0; i < 200; i++ {
				p.produce(codec, []string{fmt.Sprint("other-", i%20)}, [][]byte{[]byte("v")}, -1)
			}
			p.log.Roll()
			later := p.clock.Add(2 * time.Hour)
			policy.MinCleanableDirtyRatio = 0
			if _, err := c.Clean(context.Background(), p.log, policy, later, math.MaxInt64); err != nil {
				t.Fatal(err)
			}
			p.checkCompacted(p.log.LogEndOffset(), uncleanable) // tombstones cleaned an hour ago go

			// Reopening finds the same log.
			dir, cfg := p.log.Dir(), p.log.Config()
			if err := p.log.Close(); err != nil {
				t.Fatal(err)
			}
			if p.log, err = segment.Open(dir, cfg); err != nil {
				t.Fatal(err)
			}
			p.checkCompacted(p.log.LogEndOffset(), uncleanable)
		})
	}
}

// TestCleanWithSmallKeyMap: a key map smaller than the dirty section's keys cleans over several
// passes and ends in the same place.
func TestCleanWithSmallKeyMap(t *testing.T) {
	p := newProducedLog(t, 8<<10)
	for i := 0; i < 3000; i++ {
		key := fmt.Sprint("k", p.rng.IntN(400))
		p.produce(batch.CodecNone, []string{key}, [][]byte{fmt.Appendf(nil, "v%d", i)}, -1)
	}
	p.log.Roll()
	c := newTestCleaner(t, 100*keySlotBytes) // 90 keys per pass
	policy := DefaultPolicy()
	policy.MinCleanableDirtyRatio = 0
	for pass := 0; ; pass++ {
		stats, err := c.Clean(context.Background(), p.log, policy, p.clock, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if !stats.Cleaned {
			break
		}
		if pass > 100 {
			t.Fatal("cleaning does not converge")
		}
	}
	p.checkCompacted(p.log.LogEndOffset(), -1)
}

func TestCleanLeavesYoungAndActiveSegments(t *testing.T) {
	p := newProducedLog(t, 4<<10)
	for i := 0; i < 400; i++ {
		p.produce(batch.CodecNone, []string{"same"}, [][]byte{fmt.Appendf(nil, "v%d", i)}, -1)
	}
	c := newTestCleaner(t, 1<<20)
	policy := DefaultPolicy()
	policy.MinCompactionLag = time.Minute
	stats, err := c.Clean(context.Background(), p.log, policy, p.clock, math.MaxInt64) // every record is younger
	if err != nil || stats.Cleaned {
		t.Fatalf("cleaned records younger than the minimum lag: %+v, %v", stats, err)
	}
	stats, err = c.Clean(context.Background(), p.log, policy, p.clock.Add(time.Hour), math.MaxInt64)
	if err != nil || !stats.Cleaned {
		t.Fatalf("nothing cleaned past the lag: %+v, %v", stats, err)
	}
	segments := p.log.Segments()
	active := segments[len(segments)-1]
	if stats.CleanedUpTo != active.BaseOffset {
		t.Fatalf("cleaned up to %d, active segment starts at %d", stats.CleanedUpTo, active.BaseOffset)
	}
	records := readLog(t, p.log, p.codecs)
	if records[0].offset != active.BaseOffset-1 {
		// The cleaned part holds only the last record before the active segment; the active
		// segment holds all its records.
		t.Fatalf("first record at %d, want %d", records[0].offset, active.BaseOffset-1)
	}
	if want := active.NextOffset - active.BaseOffset + 1; int64(len(records)) != want {
		t.Fatalf("%d records, want %d", len(records), want)
	}
}
