package segment

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestInjectedFsyncFaultFailsTheLog: with the hook failing, a flush fails with ErrFailed and the
// log takes no more appends; without it, nothing changes.
func TestInjectedFsyncFaultFailsTheLog(t *testing.T) {
	var failing atomic.Bool
	cfg := DefaultConfig()
	cfg.Preallocate = false
	cfg.FsyncFault = func() error {
		if failing.Load() {
			return syscall.EIO
		}
		return nil
	}
	l := openLog(t, t.TempDir(), cfg)
	gen := newBatchGen(1)
	if _, err := l.Append(gen.next(2, 100), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatalf("sync with the hook passing: %v", err)
	}
	failing.Store(true)
	if _, err := l.Append(gen.next(2, 100), 0); err != nil {
		t.Fatal(err)
	}
	err := l.Sync(context.Background())
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync with the hook failing: %v, want ErrFailed wrapping EIO", err)
	}
	if _, err := l.Append(gen.next(1, 100), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failed fsync: %v, want ErrFailed", err)
	}
}
