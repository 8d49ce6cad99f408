package segment

import (
	"errors"
	"math"
	"testing"
)

func TestAdvanceLogStart(t *testing.T) {
	dir := t.TempDir()
	cfg := crashConfig()
	cfg.RetentionTime = -1
	l := openLog(t, dir, cfg)
	gen := newBatchGen(5)
	var batches []storedBatch
	for l.SegmentCount() < 5 {
		stored, _ := appendBatches(t, l, gen.random(), 0)
		batches = append(batches, stored...)
	}
	segments := l.Segments()
	// Inside the third segment, in the middle of a batch.
	var target storedBatch
	for _, b := range batches {
		if b.base > segments[2].BaseOffset && b.last > b.base {
			target = b
			break
		}
	}
	offset := target.base + 1
	if got, err := l.AdvanceLogStart(offset); err != nil || got != offset {
		t.Fatalf("advance to %d: %d, %v", offset, got, err)
	}
	check := func(l *Log) {
		t.Helper()
		if l.LogStartOffset() != offset {
			t.Fatalf("log start %d, want %d", l.LogStartOffset(), offset)
		}
		if got := l.Segments()[0].BaseOffset; got != segments[2].BaseOffset {
			t.Fatalf("first segment at %d, want %d (the two before deleted)", got, segments[2].BaseOffset)
		}
		if _, err := l.Read(offset-1, 1, math.MaxInt64, nil); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read below the start: %v", err)
		}
		got, err := l.Read(offset, 1, math.MaxInt64, nil)
		if err != nil || string(got) != string(target.raw) {
			t.Fatalf("read at the start: %d bytes, %v; want the batch holding it", len(got), err)
		}
	}
	check(l)
	if got, err := l.AdvanceLogStart(offset - 5); err != nil || got != offset {
		t.Fatalf("moving back: %d, %v", got, err)
	}
	if _, err := l.AdvanceLogStart(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("beyond the end: %v", err)
	}
	// Retention deleting nothing, then a crash: the start stays.
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	check(l)
	l.abandon()
	l = openLog(t, dir, cfg)
	check(l)
	// Up to the end: every sealed segment goes, the active one stays, empty of readable records.
	end := l.LogEndOffset()
	if _, err := l.AdvanceLogStart(end); err != nil {
		t.Fatal(err)
	}
	if l.SegmentCount() != 1 || l.LogStartOffset() != end {
		t.Fatalf("%d segments, start %d, want 1 and %d", l.SegmentCount(), l.LogStartOffset(), end)
	}
	l.Close()
	l = openLog(t, dir, cfg)
	if l.LogStartOffset() != end {
		t.Fatalf("after reopening: start %d, want %d", l.LogStartOffset(), end)
	}
	stored, _ := appendBatches(t, l, gen.random(), 0)
	if got, err := l.Read(end, 1, math.MaxInt64, nil); err != nil || string(got) != string(stored[0].raw) {
		t.Fatalf("read of the batch appended after the start: %d bytes, %v", len(got), err)
	}
	l.Close()
}
