package replication

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/smalldisk"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A leader whose last append found the disk full asks the controller to move its leadership (to
// an in-sync replica that may have room), as for a failed log. The full disk is a small tmpfs
// (the test skips where it cannot be mounted); segment's TestDiskFull covers Log.OutOfSpace.
func TestLeaderOnAFullDiskResigns(t *testing.T) {
	dir := smalldisk.Mount(t, 256<<10)
	leader := openReplicaIn(t, dir, 1, AckFsync)
	if _, err := leader.MakeLeader(1, 5, []int32{1, 2, 3}, []int32{1, 2, 3}, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, 0)
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

// A follower whose disk is full tells the leader at once (FailedCopyTag), so that it leaves the
// ISR instead of stalling acks=all for the lag time, and tries again every diskFullRetryInterval
// instead of asking the leader about epochs in a loop (found by the chaos suite's disk-full fault:
// thousands of failed appends a second on the full node, and acks=all stalled for the lag time).
// Once the records fit, the tag stops.
func TestFollowerOnAFullDiskReportsAndRetries(t *testing.T) {
	dir := smalldisk.Mount(t, 256<<10)
	m := newTestManager(t, 1)
	follower := openReplicaIn(t, filepath.Join(dir, "log"), 1, AckFsync)
	follower.MakeFollower(2, 0, 1, []int32{1, 2}, []int32{1, 2})
	p := &followed{replica: follower, leaderEpoch: 0, reportedDurable: -1}
	m.mu.Lock()
	m.mu.followed[2] = map[partitionKey]*followed{keyOf(follower): p}
	m.mu.Unlock()
	f := &fetcher{manager: m, leaderID: 2, logger: m.logger}
	fetched := func(base int64) {
		t.Helper()
		raw := records(strings.Repeat("x", 16<<10))
		batch.SetBaseOffset(raw, base)
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = fetchVersion
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = follower.Topic
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.RecordBatches = follower.Partition, 0, raw
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		if err := f.handleFetch([]*followed{p}, resp.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	tagged := func() bool {
		tags := f.fetchRequest([]*followed{p}, true).Topics[0].Partitions[0].UnknownTags
		found := false
		tags.Each(func(key uint32, _ []byte) { found = found || key == FailedCopyTag })
		return found
	}

	fetched(0) // with room: the epoch history and the log take it
	filler := filepath.Join(dir, "filler")
	smalldisk.Fill(t, filler)
	fetched(1)
	now := time.Now()
	if follower.Log.LogEndOffset() != 1 || !follower.Log.OutOfSpace() {
		t.Fatalf("log end %d, out of space %v: the append should have found the disk full", follower.Log.LogEndOffset(), follower.Log.OutOfSpace())
	}
	if p.needsEpochCheck || !p.pausedUntil.After(now) {
		t.Fatalf("after a full-disk append: epoch check %v, paused until %v (now %v); want a paced retry", p.needsEpochCheck, p.pausedUntil, now)
	}
	if !failedReportDue(p, now) || !tagged() {
		t.Fatal("a full-disk follower does not report that it takes no appends")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	fetched(1)
	if follower.Log.LogEndOffset() != 2 || cannotCopy(p) || tagged() {
		t.Fatalf("with room again: log end %d, cannot copy %v, tagged %v", follower.Log.LogEndOffset(), cannotCopy(p), tagged())
	}
}
