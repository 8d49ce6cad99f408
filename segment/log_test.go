package segment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
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
// TestPreallocationInSteps: nothing is preallocated before the first append, then steps of 64 KiB
// double up to PreallocateStep; a sealed segment is trimmed, and a reopened one preallocates again
// only when appended to, starting small.
func TestPreallocationInSteps(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.PreallocateStep = 256 << 10
	cfg.PreallocateRest = false // TestBusySegmentPreallocatesTheRest
	l := openLog(t, dir, cfg)
	fileSize := func() int64 {
		t.Helper()
		info, err := l.activeSegment().file.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	if got := fileSize(); got != 0 {
		t.Fatalf("new segment file is %d bytes, want nothing preallocated before the first append", got)
	}
	// Once the data passes each allocation, the file grows by the next step: 64, +128, +256, +256 KiB.
	allocated := int64(0)
	for _, want := range []int64{64 << 10, 192 << 10, 448 << 10, 704 << 10} {
		for l.activeSegment().size() <= allocated {
			if _, err := l.Append(testBatch(t, "x", 10, 100), 0); err != nil {
				t.Fatal(err)
			}
		}
		if got := fileSize(); got != want {
			t.Fatalf("after %d bytes of data the file is %d bytes, want %d", l.activeSegment().size(), got, want)
		}
		allocated = want
	}
	for l.SegmentCount() == 1 {
		if _, err := l.Append(testBatch(t, "y", 10, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	if sealed := l.segmentList()[0]; sealed.allocated != sealed.size() || sealed.size() > cfg.SegmentBytes {
		t.Fatalf("sealed segment: allocated %d, size %d", sealed.allocated, sealed.size())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	defer l.Close()
	size := l.activeSegment().size()
	if got := fileSize(); got != size {
		t.Fatalf("reopened active segment: file %d bytes for %d bytes of data, want nothing preallocated", got, size)
	}
	if _, err := l.Append(testBatch(t, "z", 1, 100), 0); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(); got != size+64<<10 {
		t.Fatalf("reopened active segment after one append: file %d bytes for %d bytes of data, want one first step more", got, size)
	}
}

// TestBusySegmentPreallocatesTheRest: once a segment's steps reach PreallocateStep, its next step
// reserves the rest of the segment in one fallocate, where the filesystem has room for it.
func TestBusySegmentPreallocatesTheRest(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	cfg.PreallocateStep = 256 << 10
	l := openLog(t, dir, cfg)
	defer l.Close()
	if !roomForRest(l.activeSegment().file, cfg.SegmentBytes, cfg.SegmentBytes) {
		t.Skipf("the filesystem of %s is tmpfs or has less than an eighth of its size free", dir)
	}
	// The first segment's file sizes, each once, until the log rolls.
	var sizes []int64
	for {
		if _, err := l.Append(testBatch(t, "x", 10, 100), 0); err != nil {
			t.Fatal(err)
		}
		if l.SegmentCount() > 1 {
			break
		}
		info, err := l.activeSegment().file.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if len(sizes) == 0 || sizes[len(sizes)-1] != info.Size() {
			sizes = append(sizes, info.Size())
		}
	}
	// 64, +128, then the step is 256 KiB: the rest of the 4 MiB segment.
	want := []int64{64 << 10, 192 << 10, 4 << 20}
	if !slices.Equal(sizes, want) {
		t.Fatalf("the file grew through %v bytes, want %v", sizes, want)
	}
}

// TestIdlePartitionsHoldLittleDisk opens many logs with the default configuration (1 GiB segments,
// 64 MiB preallocation steps) and writes one small batch to half of them, as a broker with many idle
// partitions does: one never appended to holds no block at all, one with a batch at most the first
// 64 KiB step, not a whole step (64 MiB per empty partition filled a disk at about 1,200
// partitions), before and after a restart.
func TestIdlePartitionsHoldLittleDisk(t *testing.T) {
	parent := t.TempDir()
	cfg := DefaultConfig()
	const logs = 40
	var total int64
	check := func(stage string, dir string, written bool) {
		t.Helper()
		info, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%020d.log", 0)))
		if err != nil {
			t.Fatal(err)
		}
		blocks := info.Sys().(*syscall.Stat_t).Blocks * 512 // what du counts
		limit, blockLimit := int64(0), int64(0)             // never appended to: not one block
		if written {
			limit, blockLimit = preallocateFirstStep, preallocateFirstStep+4096
		}
		if info.Size() > limit || blocks > blockLimit {
			t.Fatalf("%s: %s holds %d bytes (%d allocated), want at most %d (%d allocated)", stage, dir, info.Size(), blocks, limit, blockLimit)
		}
		total += blocks
	}
	for round, stage := range []string{"open", "reopen"} {
		for i := 0; i < logs; i++ {
			dir := filepath.Join(parent, strconv.Itoa(i))
			l := openLog(t, dir, cfg)
			if round == 0 && i%2 == 0 {
				if _, err := l.Append(testBatch(t, "idle", 1, 100), 0); err != nil {
					t.Fatal(err)
				}
			}
			check(stage, dir, i%2 == 0)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d logs hold %d bytes of disk over two rounds", logs, total)
}
