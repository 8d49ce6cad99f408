package segment

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/smalldisk"
)

// TestDiskFull fills a 1 MiB filesystem: appends and rolls fail with ENOSPC, nothing written before
// is lost or damaged, the log reopens on the full disk, and takes appends again once there is room.
// The failures are logged, one line per 30 s however many appends fail.
func TestDiskFull(t *testing.T) {
	for _, c := range []struct {
		name        string
		preallocate bool
		step        int64
	}{
		{"whole-segment", true, 0},
		{"in-steps", true, 40 << 10},
		{"no-preallocation", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			disk := smalldisk.Mount(t, 1<<20)
			dir := filepath.Join(disk, "log")
			// Something else on the disk that can be deleted later to make room.
			filler := filepath.Join(disk, "filler")
			if err := os.WriteFile(filler, make([]byte, 300<<10), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.SegmentBytes = 128 << 10
			cfg.IndexIntervalBytes = 4096
			cfg.Preallocate = c.preallocate
			cfg.PreallocateStep = c.step
			var lines logLines
			now := time.Unix(1_700_000_000, 0)
			cfg.Logger = lines.logger()
			cfg.Now = func() time.Time { return now }
			l := openLog(t, dir, cfg)
			gen := newBatchGen(2)
			var want []storedBatch
			var full error
			for i := 0; i < 1000 && full == nil; i++ {
				raw := gen.next(3, 6000+gen.rng.IntN(6000))
				end := l.LogEndOffset()
				if _, err := l.Append(raw, 0); err != nil {
					full = err
					if l.LogEndOffset() != end {
						t.Fatalf("failed append moved the log end from %d to %d", end, l.LogEndOffset())
					}
					break
				}
				want = append(want, splitBatches(t, raw)...)
			}
			if !errors.Is(full, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v, want ENOSPC", full)
			}
			t.Logf("disk full after %d batches in %d segments: %v", len(want), l.SegmentCount(), full)
			checkBatches(t, l, want)
			if !l.OutOfSpace() || l.Failure() != nil {
				t.Fatalf("after ENOSPC: OutOfSpace %v, Failure %v; want out of space, not failed", l.OutOfSpace(), l.Failure())
			}
			// It stays an error, not a failed log, and nothing moves.
			for i := 0; i < 3; i++ {
				if _, err := l.Append(gen.next(3, 9000), 0); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("append on a full disk: %v", err)
				}
			}
			if got := lines.matching("level=ERROR", "disk full", "no space left"); len(got) != 1 {
				t.Fatalf("%d log lines for 4 appends failing within 30 s, want 1: %q", len(got), got)
			}
			now = now.Add(31 * time.Second)
			if _, err := l.Append(gen.next(3, 9000), 0); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: %v", err)
			}
			if got := lines.matching("level=ERROR", "disk full", "repeats_not_logged=3"); len(got) != 1 {
				t.Fatalf("no second line counting the 3 failures held back: %q", lines.matching("disk full"))
			}
			if err := l.Roll(); err != nil && !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("roll on a full disk: %v", err)
			}
			checkBatches(t, l, want)
			// Crash on the full disk; recovery must not need space it cannot get.
			l.abandon()
			l = openLog(t, dir, cfg)
			checkBatches(t, l, want)
			// Close may fail to write index entries (no clean marker then); the data must survive.
			if err := l.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("close on a full disk: %v", err)
			}
			l = openLog(t, dir, cfg)
			checkBatches(t, l, want)
			if _, err := l.Append(gen.next(3, 9000), 0); !errors.Is(err, syscall.ENOSPC) || !l.OutOfSpace() {
				t.Fatalf("append on a full disk after reopening: %v, OutOfSpace %v", err, l.OutOfSpace())
			}
			// Room again: appends resume at the right offset, and the log is no longer out of space.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 10; i++ {
				stored, _ := appendBatches(t, l, gen.next(3, 9000), 0)
				want = append(want, stored...)
			}
			if l.OutOfSpace() {
				t.Fatal("still out of space after appends succeeded")
			}
			checkBatches(t, l, want)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, cfg)
			checkBatches(t, l, want)
			l.Close()
		})
	}
}
