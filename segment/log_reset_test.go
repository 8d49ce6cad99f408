package segment

import (
	"context"
	"errors"
	"math"
	"testing"
)

// TestResetTo empties a log of several segments and restarts it beyond its end, as a follower whose
// leader deleted the offsets it lacks: reads below the new start are out of range, appends continue
// at it, and a crash or a clean restart both keep the new start.
func TestResetTo(t *testing.T) {
	dir := t.TempDir()
	cfg := crashConfig()
	l := openLog(t, dir, cfg)
	gen := newBatchGen(11)
	for l.SegmentCount() < 4 {
		appendBatches(t, l, gen.random(), 0)
	}
	oldEnd := l.LogEndOffset()
	target := oldEnd + 1000
	if err := l.ResetTo(target); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log, end int64) {
		t.Helper()
		if l.LogStartOffset() != target || l.LogEndOffset() != end || l.SegmentCount() != 1 {
			t.Fatalf("start %d, end %d, %d segments; want %d, %d, 1", l.LogStartOffset(), l.LogEndOffset(), l.SegmentCount(), target, end)
		}
		if _, err := l.Read(oldEnd-1, 1, math.MaxInt64, nil); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read of an offset the reset dropped: %v, want ErrOffsetOutOfRange", err)
		}
	}
	check(l, target)
	if got := l.FlushedOffset(); got != target {
		t.Fatalf("flushed offset %d, want %d", got, target)
	}
	stored, result := appendBatches(t, l, gen.random(), 3)
	if result.BaseOffset != target {
		t.Fatalf("the first append after the reset got offset %d, want %d", result.BaseOffset, target)
	}
	end := l.LogEndOffset()
	if err := l.WaitFlushed(context.Background(), end-1); err != nil {
		t.Fatal(err)
	}
	checkBatches(t, l, stored)

	l.abandon() // a crash
	l = openLog(t, dir, cfg)
	check(l, end)
	checkBatches(t, l, stored)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	check(l, end)
	checkBatches(t, l, stored)

	// Back below the end: the log loses what it held and starts over there.
	target = 7
	if err := l.ResetTo(target); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 7 || l.LogEndOffset() != 7 {
		t.Fatalf("after a reset down: start %d, end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	l.Close()
	l = openLog(t, dir, cfg)
	defer l.Close()
	if l.LogStartOffset() != 7 || l.LogEndOffset() != 7 {
		t.Fatalf("reopened after a reset down: start %d, end %d", l.LogStartOffset(), l.LogEndOffset())
	}
}
