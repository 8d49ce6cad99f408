package segment

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// testBatch encodes one batch of count records with distinguishable values.
func testBatch(t testing.TB, tag string, count int, valueSize int) []byte {
	t.Helper()
	var b batch.Builder
	b.Reset(time.UnixMilli(1_700_000_000_000))
	for i := 0; i < count; i++ {
		v := make([]byte, valueSize)
		copy(v, fmt.Sprintf("%s-%d", tag, i))
		b.Add(batch.Record{Value: v})
	}
	return append([]byte(nil), b.Finish()...)
}

func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 512
	return cfg
}

func openLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAppendReadRollReopen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, smallConfig())
	var want []int64
	for i := 0; i < 300; i++ {
		res, err := l.Append(testBatch(t, fmt.Sprint(i), 3, 100), 5)
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != int64(i*3) || res.LastOffset != int64(i*3+2) {
			t.Fatalf("append %d: %+v", i, res)
		}
		want = append(want, res.BaseOffset)
	}
	if l.SegmentCount() < 2 {
		t.Fatalf("expected rolls, have %d segments", l.SegmentCount())
	}
	check := func(l *Log) {
		t.Helper()
		for offset := int64(0); offset < 900; offset += 7 {
			raw, err := l.Read(offset, 1, 1<<62, nil)
			if err != nil {
				t.Fatal(err)
			}
			h, err := batch.Validate(raw)
			if err != nil || h.BaseOffset != offset/3*3 || h.Size() != len(raw) || h.PartitionLeaderEpoch != 5 {
				t.Fatalf("read %d: %+v %v", offset, h, err)
			}
		}
		if l.LogEndOffset() != 900 {
			t.Fatalf("end %d", l.LogEndOffset())
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, smallConfig())
	check(l)
	if err := l.WaitFlushed(context.Background(), 899); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(900, 100, 1<<62, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(901, 100, 1<<62, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond end: %v", err)
	}
	l.Close()
}

// TestPreallocationInSteps: a segment reserves disk a step at a time, up to the segment size, and
// reopening keeps the reservation ahead of the logical end.
func TestPreallocationInSteps(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.PreallocateStep = 64 << 10
	l := openLog(t, dir, cfg)
	fileSize := func() int64 {
		t.Helper()
		info, err := l.activeSegment().file.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	if got := fileSize(); got != 64<<10 {
		t.Fatalf("new segment file is %d bytes, want one step", got)
	}
	for l.activeSegment().size.Load() < 100<<10 {
		if _, err := l.Append(testBatch(t, "x", 10, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := fileSize(); got != 128<<10 {
		t.Fatalf("after 100 KiB the file is %d bytes, want two steps", got)
	}
	for l.SegmentCount() == 1 {
		if _, err := l.Append(testBatch(t, "y", 10, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	if sealed := l.segmentList()[0]; sealed.allocated != sealed.size.Load() || sealed.size.Load() > cfg.SegmentBytes {
		t.Fatalf("sealed segment: allocated %d, size %d", sealed.allocated, sealed.size.Load())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	defer l.Close()
	if got, size := fileSize(), l.activeSegment().size.Load(); got <= size || got > size+64<<10 {
		t.Fatalf("reopened active segment: file %d bytes for %d bytes of data", got, size)
	}
}
