package compaction

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/segment"
)

func TestKeyMapBoundedAndExact(t *testing.T) {
	m := newKeyMap(1000 * keySlotBytes)
	if m.capacity() != 900 {
		t.Fatalf("capacity %d, want 900", m.capacity())
	}
	for i := 0; i < m.capacity(); i++ {
		if !m.put(fmt.Appendf(nil, "key-%d", i), int64(i)) {
			t.Fatalf("full after %d keys", i)
		}
	}
	if m.put([]byte("one too many"), 1) {
		t.Fatal("a full map took a new key")
	}
	if !m.put([]byte("key-7"), 5000) {
		t.Fatal("a full map refused to update a key it holds")
	}
	for i := 0; i < m.capacity(); i++ {
		want := int64(i)
		if i == 7 {
			want = 5000
		}
		if got := m.get(fmt.Appendf(nil, "key-%d", i)); got != want {
			t.Fatalf("key-%d: %d, want %d", i, got, want)
		}
	}
	if got := m.get([]byte("absent")); got != -1 {
		t.Fatalf("absent key: %d", got)
	}
	m.reset()
	if got := m.get([]byte("key-1")); got != -1 || !m.put([]byte("x"), 1) {
		t.Fatal("reset did not empty the map")
	}
}

func TestPlanCleaning(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	seg := func(base, next, size, maxTimestamp int64, sealed bool) segment.SegmentInfo {
		return segment.SegmentInfo{BaseOffset: base, NextOffset: next, Size: size, MaxTimestamp: maxTimestamp, Sealed: sealed}
	}
	segments := []segment.SegmentInfo{
		seg(0, 100, 1000, 1000, true),
		seg(100, 200, 1000, 2000, true),
		seg(200, 300, 1000, 990_000, true), // 10 s old
		seg(300, 350, 500, 999_000, false), // active
	}
	policy := DefaultPolicy()
	plan := PlanCleaning(segments, 0, 0, math.MaxInt64, policy, now)
	if plan.FirstDirty != 0 || plan.FirstUncleanable != 300 || plan.DirtyBytes != 3000 || !plan.Due {
		t.Fatalf("never cleaned: %+v", plan)
	}
	plan = PlanCleaning(segments, 0, 100, math.MaxInt64, policy, now)
	if plan.CleanBytes != 1000 || plan.DirtyBytes != 2000 || plan.DirtyRatio() < 0.66 || !plan.Due {
		t.Fatalf("cleaned below 100: %+v", plan)
	}
	policy.MinCleanableDirtyRatio = 0.7
	if plan = PlanCleaning(segments, 0, 100, math.MaxInt64, policy, now); plan.Due {
		t.Fatalf("ratio %.2f below 0.7 is due", plan.DirtyRatio())
	}
	policy.MaxCompactionLag = time.Minute // the oldest dirty segment is ~1000 s old
	if plan = PlanCleaning(segments, 0, 100, math.MaxInt64, policy, now); !plan.Due {
		t.Fatal("a dirty segment past the maximum lag is not due")
	}
	policy = DefaultPolicy()
	policy.MinCompactionLag = time.Minute // the third segment is too young
	if plan = PlanCleaning(segments, 0, 0, math.MaxInt64, policy, now); plan.FirstUncleanable != 200 {
		t.Fatalf("min lag: %+v", plan)
	}
	if plan = PlanCleaning(segments, 150, 0, math.MaxInt64, DefaultPolicy(), now); plan.FirstDirty != 150 {
		t.Fatalf("a checkpoint below the log start: %+v", plan)
	}
	if plan = PlanCleaning(segments, 0, 0, 250, DefaultPolicy(), now); plan.FirstUncleanable != 200 {
		t.Fatalf("records at or above the high watermark are not cleaned: %+v", plan)
	}
	if plan = PlanCleaning(segments, 0, 300, math.MaxInt64, DefaultPolicy(), now); plan.Due || plan.DirtyBytes != 0 {
		t.Fatalf("all clean: %+v", plan)
	}
}

func TestGroupSegments(t *testing.T) {
	segments := []segment.SegmentInfo{
		{BaseOffset: 0, NextOffset: 10, Size: 400, Sealed: true},
		{BaseOffset: 10, NextOffset: 20, Size: 400, Sealed: true},
		{BaseOffset: 20, NextOffset: 30, Size: 400, Sealed: true},
		{BaseOffset: 30, NextOffset: 40, Size: 2000, Sealed: true},
		{BaseOffset: 40, NextOffset: 50, Size: 100, Sealed: true},
		{BaseOffset: 50, NextOffset: 60, Size: 100},
	}
	got := fmt.Sprint(groupSegments(segments, 0, 60, 1000))
	if want := "[{0 20 800} {20 30 400} {30 40 2000} {40 50 100}]"; got != want {
		t.Fatalf("groups %s, want %s", got, want)
	}
	if got := fmt.Sprint(groupSegments(segments, 15, 35, 1000)); got != "[{10 30 800} {30 40 2000}]" {
		t.Fatalf("groups from 15 up to 35: %s", got)
	}
}

func TestCheckpointPasses(t *testing.T) {
	dir := t.TempDir()
	if c := readCheckpoint(dir); c.firstDirty != 0 || len(c.passes) != 0 {
		t.Fatalf("no file: %+v", c)
	}
	start := time.UnixMilli(0)
	var c checkpoint
	for i := 1; i <= 200; i++ {
		c = c.withPass(int64(i*10), start.Add(time.Duration(i)*time.Minute), time.Hour)
	}
	if len(c.passes) > maxPasses || c.firstDirty != 2000 {
		t.Fatalf("%d passes, first dirty %d", len(c.passes), c.firstDirty)
	}
	// Records cleaned within the last hour must not count as cleaned earlier than they were.
	for offset := int64(1400); offset < 2000; offset += 7 {
		at, ok := c.cleanedAt(offset)
		firstCleaned := (offset/10 + 1) * int64(time.Minute/time.Millisecond)
		if !ok || at < firstCleaned {
			t.Fatalf("offset %d: cleaned at %d (%v), first cleaned at %d", offset, at, ok, firstCleaned)
		}
	}
	if err := writeCheckpoint(dir, c); err != nil {
		t.Fatal(err)
	}
	if got := readCheckpoint(dir); fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("read back %+v, wrote %+v", got, c)
	}
}
