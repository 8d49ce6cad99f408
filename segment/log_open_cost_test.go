package segment

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// processReadBytes is the bytes this process has read through read(2)/pread(2) so far, page cache
// hits included (rchar in /proc/self/io).
func processReadBytes(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io (%v): cannot count the bytes Open reads", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if value, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/self/io: %q", raw)
	return 0
}

// TestOpenReadsOnlySegmentTails counts the bytes Open reads (the process's rchar) for a 24 MiB log of
// six 4 MiB segments. After a clean close, and after a crash whose recovery point is at the end, Open
// reads the index files and, of each data file, at most the stretch after its last index entry that
// checks out (and after the last surviving time index entry): never a segment's whole data. The old
// recovery walked every header of the active segment after each crash, making the recovery point
// useless for it. Without a recovery point the active segment is scanned in full (and only it), as
// the crash-recovery contract requires.
func TestOpenReadsOnlySegmentTails(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	cfg.IndexIntervalBytes = 4096
	cfg.CheckpointInterval = 0
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	gen := newBatchGen(5)
	for l.SegmentCount() < 6 || l.activeSegment().size() < cfg.SegmentBytes-64<<10 {
		if _, err := l.Append(gen.next(4, 1000), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	total, activeSize, segments, end := l.Size(), l.activeSegment().size(), l.SegmentCount(), l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	indexBytes := int64(0)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), offsetSuffix) || strings.HasSuffix(e.Name(), timeSuffix) {
			info, _ := e.Info()
			indexBytes += info.Size()
		}
	}
	// Per segment: the batch at the last index entry, one header window and the scan after the
	// entry (IndexIntervalBytes plus a batch), each well under 64 KiB.
	tailBudget := indexBytes + int64(segments)*64<<10
	open := func(name string, budget int64) {
		t.Helper()
		before := processReadBytes(t)
		reopened, err := Open(dir, cfg)
		read := processReadBytes(t) - before
		if err != nil {
			t.Fatalf("%s: Open: %v", name, err)
		}
		if reopened.LogEndOffset() != end || reopened.SegmentCount() != segments {
			t.Fatalf("%s: log end %d in %d segments, want %d in %d", name, reopened.LogEndOffset(), reopened.SegmentCount(), end, segments)
		}
		t.Logf("%s: Open read %d bytes of a %d-byte log (%d bytes of index files)", name, read, total, indexBytes)
		if read > budget {
			t.Errorf("%s: Open read %d bytes, want at most %d: it scanned data it must trust", name, read, budget)
		}
		reopened.abandon() // a crash: the recovery point the flusher wrote stays at the end
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("Close left no clean marker: %v", err)
	}
	open("clean", tailBudget)
	open("crash, recovery point at the end", tailBudget)

	// A crash right after a group commit, with 2 MiB appended in a new segment since its last time
	// index entry (flat timestamps: no new entry). The point the flusher wrote vouches for the time
	// index, so nothing of the 2 MiB is read to replay it.
	l = openLog(t, dir, cfg)
	var builder batch.Builder
	for l.SegmentCount() == segments || l.activeSegment().size() < 2<<20 {
		builder.Reset(time.UnixMilli(1_600_000_000_000))
		builder.Add(batch.Record{Value: make([]byte, 1000)})
		if _, err := l.Append(builder.Finish(), 1); err != nil {
			t.Fatal(err)
		}
	}
	l.flush.flushOnce() // the fsync, then (CheckpointInterval 0) the recovery point
	end, segments = l.LogEndOffset(), l.SegmentCount()
	l.abandon()
	open("crash after a group commit, 2 MiB since the last time entry", tailBudget)

	if err := os.Remove(filepath.Join(dir, recoveryPointFile)); err != nil {
		t.Fatal(err)
	}
	open("crash, no recovery point", tailBudget+activeSize+2<<20+256<<10)
}
