package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"golang.org/x/sys/unix"
)

// A leader whose last append found the disk full asks the controller to move its leadership (to
// an in-sync replica that may have room), as for a failed log. The full disk is a small tmpfs
// (the test skips where it cannot be mounted); segment's TestDiskFull covers Log.OutOfSpace.
func TestLeaderOnAFullDiskResigns(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", 256<<10)); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	leader := openReplicaIn(t, dir, 1, AckFsync)
	if _, err := leader.MakeLeader(1, 5, []int32{1, 2, 3}, []int32{1, 2, 3}, time.Now()); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(DefaultConfig(), func(int32) (string, bool) { return "", false },
		func(context.Context, string, int32, int32, int32, []int32) error { return nil }, metrics.NewSet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	resigned := make(chan int32, 4)
	m.SetResigner(func(_ context.Context, topic string, partition, leaderEpoch int32) error {
		resigned <- leaderEpoch
		return nil
	})

	m.resignFailedLeaders([]*Replica{leader}, time.Now())
	value := strings.Repeat("x", 16<<10)
	var full error
	for i := 0; i < 64 && full == nil; i++ {
		_, full = leader.Log.Append(records(value), 1)
	}
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("filling the disk: %v, want ENOSPC", full)
	}
	select {
	case epoch := <-resigned:
		t.Fatalf("resigned at epoch %d before the disk was full", epoch)
	default:
	}

	m.resignFailedLeaders([]*Replica{leader}, time.Now())
	select {
	case epoch := <-resigned:
		if epoch != 1 {
			t.Fatalf("resigned at leader epoch %d, want 1", epoch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a leader on a full disk did not ask to resign")
	}
}
