package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

func openReplica(t *testing.T, node int32, mode AckMode) *Replica {
	t.Helper()
	return openReplicaIn(t, t.TempDir(), node, mode)
}

// openReplicaIn opens a replica of partition t-0 whose log lives in dir.
func openReplicaIn(t *testing.T, dir string, node int32, mode AckMode) *Replica {
	t.Helper()
	return openReplicaWith(t, dir, Config{NodeID: node, AckMode: mode, LagTimeMax: 5 * time.Second})
}

// openReplicaWith opens a replica of partition t-0 with config, whose log lives in dir.
func openReplicaWith(t *testing.T, dir string, config Config) *Replica {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes, cfg.Preallocate = 1<<20, false
	log, err := segment.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	epochs, err := OpenEpochHistory(dir, log.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	return NewReplica("t", 0, log, epochs, config)
}

// newTestManager makes a Manager for node nodeID that knows no leader addresses and accepts every
// ISR proposal; it closes when the test ends.
func newTestManager(t *testing.T, nodeID int32) *Manager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID = nodeID
	m, err := NewManager(cfg, func(int32) (string, bool) { return "", false },
		func(context.Context, string, int32, int32, int32, []int32) error { return nil }, metrics.NewSet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func records(values ...string) []byte {
	var b batch.Builder
	b.ProducerID = -1
	b.Reset(time.UnixMilli(1700000000000))
	for _, v := range values {
		b.Add(batch.Record{Value: []byte(v)})
	}
	return b.Finish()
}

// replicate copies what the follower lacks from the leader, as a fetch would, and reports the
// follower's position to the leader.
func replicate(t *testing.T, leader, follower *Replica, followerID int32) {
	t.Helper()
	from := follower.Log.LogEndOffset()
	data, err := leader.Log.Read(from, 1<<20, leader.Log.LogEndOffset(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.AppendFromLeader(data); err != nil {
		t.Fatal(err)
	}
	report(t, leader, follower, followerID)
}

func report(t *testing.T, leader, follower *Replica, followerID int32) {
	t.Helper()
	high, err := leader.FollowerFetched(followerID, -1, follower.Log.LogEndOffset(), follower.Log.FlushedOffset(), false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	follower.SetFollowerHighWatermark(high)
}

func TestAcksAllWaitsForEveryInSyncReplicaToFsync(t *testing.T) {
	leader := openReplica(t, 1, AckFsync)
	follower := openReplica(t, 2, AckFsync)
	replicas := []int32{1, 2}
	if _, err := leader.MakeLeader(3, 0, replicas, replicas, time.Now()); err != nil {
		t.Fatal(err)
	}
	follower.MakeFollower(1, 3, 0, replicas, replicas)

	result, err := leader.Append(records("a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	leader.AwaitAcks(result.LastOffset, 2, func(err error) { acked <- err })
	if leader.HighWatermark() != 0 {
		t.Fatalf("high watermark %d before the follower has anything", leader.HighWatermark())
	}
	replicate(t, leader, follower, 2)
	if leader.HighWatermark() != 3 || follower.HighWatermark() != 3 {
		t.Fatalf("high watermarks %d/%d, want 3", leader.HighWatermark(), follower.HighWatermark())
	}
	select {
	case err := <-acked:
		t.Fatalf("acknowledged (%v) before the follower fsynced", err)
	default:
	}
	if err := follower.Log.WaitFlushed(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	report(t, leader, follower, 2)
	select {
	case err := <-acked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never acknowledged")
	}
	// The follower holds the leader's bytes, epoch included.
	leaderBytes, _ := leader.Log.Read(0, 1<<20, 3, nil)
	followerBytes, _ := follower.Log.Read(0, 1<<20, 3, nil)
	if string(leaderBytes) != string(followerBytes) {
		t.Fatal("replica bytes differ")
	}
	if follower.Epochs.LastEpoch() != 3 {
		t.Fatalf("follower epoch history %v", follower.Epochs.Entries())
	}
}

// TestEarlierReportDoesNotMoveAFollowerBack: a follower's parked fetch is evaluated again when an
// append wakes it, possibly after the follower's later acknowledgement fetch reported more. The
// parked fetch's older report must not take back the durable offset the acknowledgement gave: the
// produce then waited, once the other follower had reported too, for this follower's next report,
// 30 s away with a long fetch wait (found by TestClusterAcksAllDoNotWaitForParkedFetches in CI).
func TestEarlierReportDoesNotMoveAFollowerBack(t *testing.T) {
	leader := openReplica(t, 1, AckFsync)
	replicas := []int32{1, 2, 3}
	if _, err := leader.MakeLeader(1, 0, replicas, replicas, time.Now()); err != nil {
		t.Fatal(err)
	}
	result, err := leader.Append(records("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Log.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	leader.AwaitAcks(result.LastOffset, 3, func(err error) { acked <- err })
	end := result.LastOffset + 1
	fetched := func(follower int32, durable int64, arrived time.Time) {
		t.Helper()
		if _, err := leader.FollowerFetched(follower, 1, end, durable, false, arrived); err != nil {
			t.Fatal(err)
		}
	}

	parkedArrived := time.Now()
	fetched(2, 0, parkedArrived)                         // follower 2's data fetch: it has the record, not yet fsynced
	fetched(2, end, parkedArrived.Add(time.Millisecond)) // its acknowledgement after the fsync
	fetched(2, 0, parkedArrived)                         // the parked data fetch evaluated again
	fetched(3, end, time.Now())                          // follower 3 has the record fsynced
	ackedNow(t, acked, "both followers reported the record durable, but the produce is still waiting")
}

// ackedNow fails the test unless acked already holds a successful answer; why says what should
// have produced it.
func ackedNow(t *testing.T, acked <-chan error, why string) {
	t.Helper()
	select {
	case err := <-acked:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal(why)
	}
}

func TestAckMemoryWaitsForTheHighWatermarkOnly(t *testing.T) {
	leader := openReplica(t, 1, AckMemory)
	follower := openReplica(t, 2, AckMemory)
	replicas := []int32{1, 2}
	leader.MakeLeader(0, 0, replicas, replicas, time.Now())
	follower.MakeFollower(1, 0, 0, replicas, replicas)
	result, _ := leader.Append(records("a"))
	acked := make(chan error, 1)
	leader.AwaitAcks(result.LastOffset, 1, func(err error) { acked <- err })
	from := follower.Log.LogEndOffset()
	data, _ := leader.Log.Read(from, 1<<20, leader.Log.LogEndOffset(), nil)
	follower.AppendFromLeader(data)
	// Reported as fetched but not durable: memory mode acknowledges.
	if _, err := leader.FollowerFetched(2, 0, follower.Log.LogEndOffset(), 0, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	ackedNow(t, acked, "memory mode did not acknowledge at the high watermark")
}

func TestLeadershipLossAnswersWaiters(t *testing.T) {
	leader := openReplica(t, 1, AckFsync)
	replicas := []int32{1, 2}
	leader.MakeLeader(0, 0, replicas, replicas, time.Now())
	result, _ := leader.Append(records("a"))
	acked := make(chan error, 1)
	leader.AwaitAcks(result.LastOffset, 1, func(err error) { acked <- err })
	leader.MakeFollower(2, 1, 1, replicas, replicas)
	if err := <-acked; !errors.Is(err, protocol.NotLeaderOrFollower) {
		t.Fatalf("got %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if _, err := leader.Append(records("b")); !errors.Is(err, protocol.NotLeaderOrFollower) {
		t.Fatalf("a follower took a client append: %v", err)
	}
}

func TestShrunkISRAnswersNotEnoughReplicasAfterAppend(t *testing.T) {
	leader := openReplica(t, 1, AckFsync)
	replicas := []int32{1, 2}
	leader.MakeLeader(0, 0, replicas, replicas, time.Now())
	result, _ := leader.Append(records("a"))
	acked := make(chan error, 1)
	leader.AwaitAcks(result.LastOffset, 2, func(err error) { acked <- err })
	// The follower never fetches; after the lag time the leader proposes dropping it.
	isr, _, _, ok := leader.ProposeISR(time.Now().Add(time.Minute), 5*time.Second)
	if !ok || len(isr) != 1 {
		t.Fatalf("proposal %v %v", isr, ok)
	}
	leader.MakeLeader(0, 1, replicas, isr, time.Now()) // the controller committed it
	select {
	case err := <-acked:
		if !errors.Is(err, protocol.NotEnoughReplicasAfterAppend) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never answered")
	}
}

func TestFollowerTruncationDropsEpochs(t *testing.T) {
	r := openReplica(t, 2, AckFsync)
	r.MakeFollower(1, 0, 0, []int32{1, 2}, []int32{1, 2})
	data := records("a", "b")
	batch.SetLeaderEpoch(data, 0)
	more := records("c")
	batch.SetBaseOffset(more, 2)
	batch.SetLeaderEpoch(more, 4)
	if _, err := r.AppendFromLeader(append(data, more...)); err != nil {
		t.Fatal(err)
	}
	if got := r.Epochs.Entries(); len(got) != 2 || got[1] != (EpochEntry{4, 2}) {
		t.Fatalf("history %v", got)
	}
	// A fetch retried after a lost response brings the same batches again: skipped.
	if _, err := r.AppendFromLeader(append(data, more...)); err != nil || r.Log.LogEndOffset() != 3 {
		t.Fatalf("retried fetch: end %d, %v", r.Log.LogEndOffset(), err)
	}
	if err := r.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if r.Log.LogEndOffset() != 2 || r.Epochs.LastEpoch() != 0 {
		t.Fatalf("after truncation: end %d history %v", r.Log.LogEndOffset(), r.Epochs.Entries())
	}
	// A gap is refused.
	gap := records("z")
	batch.SetBaseOffset(gap, 7)
	if _, err := r.AppendFromLeader(gap); err == nil {
		t.Fatal("a batch past the log end was appended")
	}
}

func TestInSyncCountDropsFollowersPastTheLagTime(t *testing.T) {
	leader := openReplica(t, 1, AckFsync)
	f2, f3 := openReplica(t, 2, AckFsync), openReplica(t, 3, AckFsync)
	start := time.Now()
	if _, err := leader.MakeLeader(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}, start); err != nil {
		t.Fatal(err)
	}
	f2.MakeFollower(1, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3})
	f3.MakeFollower(1, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3})
	if got := leader.InSyncCount(start); got != 3 {
		t.Fatalf("InSyncCount at election = %d, want 3 (grace period)", got)
	}
	if _, err := leader.Append(records("a")); err != nil {
		t.Fatal(err)
	}
	replicate(t, leader, f2, 2) // f2 catches up now; f3 never fetches
	later := time.Now().Add(4 * time.Second)
	if got := leader.InSyncCount(later); got != 3 {
		t.Fatalf("InSyncCount within the lag time = %d, want 3", got)
	}
	if got := leader.InSyncCount(start.Add(5*time.Second + time.Millisecond)); got != 2 {
		t.Fatalf("InSyncCount past f3's lag time = %d, want 2", got)
	}
	if got := leader.InSyncCount(time.Now().Add(time.Minute)); got != 1 {
		t.Fatalf("InSyncCount a minute on = %d, want 1 (only the leader)", got)
	}
	if got := f2.InSyncCount(time.Now().Add(time.Minute)); got != 3 {
		t.Fatalf("a follower's InSyncCount = %d, want the committed ISR size 3", got)
	}
}

// TestDivergenceWithEmptyEpochsSettles: two replicas each led an epoch without writing to it, at
// the same offset (leaders killed in quick succession). The follower asks about its empty epoch 7;
// the leader, which never had it, answers with its own empty epoch 6, which the follower never had.
// The follower must drop epoch 7 and ask about an older one, not ask about 7 again forever.
func TestDivergenceWithEmptyEpochsSettles(t *testing.T) {
	leader, follower := openReplica(t, 1, AckFsync), openReplica(t, 2, AckFsync)
	replicas := []int32{1, 2, 3}
	data := records("a", "b")
	batch.SetLeaderEpoch(data, 5)
	for _, r := range []*Replica{leader, follower} {
		r.MakeFollower(3, 5, 0, replicas, replicas)
		if _, err := r.AppendFromLeader(data); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if _, err := leader.MakeLeader(6, 1, replicas, replicas, now); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.MakeLeader(7, 2, replicas, replicas, now); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.MakeLeader(8, 3, replicas, replicas, now); err != nil {
		t.Fatal(err)
	}
	follower.MakeFollower(1, 8, 3, replicas, replicas)

	settled := false
	for round := 0; round < 5 && !settled; round++ {
		epoch, end := leader.Epochs.EndOffsetFor(follower.Epochs.LastEpoch(), leader.Log.LogEndOffset())
		var err error
		if _, settled, err = follower.ResolveDivergence(epoch, end); err != nil {
			t.Fatal(err)
		}
	}
	if !settled {
		t.Fatalf("divergence not settled after 5 questions; follower history %v, leader history %v", follower.Epochs.Entries(), leader.Epochs.Entries())
	}
	if got := follower.Log.LogEndOffset(); got != 2 {
		t.Fatalf("follower log end %d, want 2 (nothing diverged)", got)
	}
	if got := follower.Epochs.LastEpoch(); got != 5 {
		t.Fatalf("follower's last epoch %d, want 5 (its empty epoch 7 dropped): %v", got, follower.Epochs.Entries())
	}
}

// A leader's ISR proposal is settled by any later partition epoch, even when the update that
// brings it (metadata updates coalesce) shows another ISR: the expansion was applied and a fence
// took the member out again before this leader saw either. Otherwise the proposal stays pending
// and the leader never proposes for the partition again.
func TestPendingISRSettledByLaterPartitionEpoch(t *testing.T) {
	leader := openReplica(t, 1, AckFsync)
	now := time.Now()
	if _, err := leader.MakeLeader(1, 5, []int32{1, 2, 3}, []int32{1, 2}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.FollowerFetched(3, 1, 0, 0, false, now); err != nil {
		t.Fatal(err)
	}
	isr, _, partitionEpoch, ok := leader.ProposeISR(now, 5*time.Second)
	if !ok || partitionEpoch != 5 || len(isr) != 3 {
		t.Fatalf("proposal %v at partition epoch %d, ok %v; want [1 2 3] at 5", isr, partitionEpoch, ok)
	}
	// Partition epoch 6 (the expansion) and 7 (3 fenced out again) arrive as one update.
	if _, err := leader.MakeLeader(1, 7, []int32{1, 2, 3}, []int32{1, 2}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.FollowerFetched(3, 1, 0, 0, false, now); err != nil {
		t.Fatal(err)
	}
	isr, _, partitionEpoch, ok = leader.ProposeISR(now, 5*time.Second)
	if !ok || partitionEpoch != 7 || len(isr) != 3 {
		t.Fatalf("after the update: proposal %v at partition epoch %d, ok %v; want [1 2 3] at 7", isr, partitionEpoch, ok)
	}
	// The same partition epoch applied again (a re-applied snapshot) leaves a pending proposal alone.
	if _, err := leader.MakeLeader(1, 7, []int32{1, 2, 3}, []int32{1, 2}, now); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := leader.ProposeISR(now, 5*time.Second); ok {
		t.Fatal("a second proposal while the first is pending at the same partition epoch")
	}
}

// After the controller refuses an ISR that adds a member (it refuses a fenced broker, which may be
// fetching and caught up), the leader waits before proposing the addition again, instead of at
// every ISR check (about 1,800 refused proposals in a 3-minute disk-full chaos run): 250 ms after
// the first refusal, doubling up to 2 s, and short again once nobody waits to join; a shrink is
// still proposed at once.
func TestRefusedISRGrowthBacksOff(t *testing.T) {
	leader := openReplica(t, 1, AckFsync)
	now := time.Now()
	if _, err := leader.MakeLeader(1, 5, []int32{1, 2, 3}, []int32{1, 2}, now); err != nil {
		t.Fatal(err)
	}
	fetch := func(at time.Time, ids ...int32) {
		t.Helper()
		for _, id := range ids {
			if _, err := leader.FollowerFetched(id, 1, 0, 0, false, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	fetch(now, 2, 3)
	if isr, _, _, ok := leader.ProposeISR(now, 5*time.Second); !ok || len(isr) != 3 {
		t.Fatalf("proposal %v, ok %v; want [1 2 3]", isr, ok)
	}
	// Refused three times in a row: the waits are 250 ms, 500 ms, 1 s.
	at := now
	for _, wait := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		leader.ProposalFailed(at)
		if isr, _, _, ok := leader.ProposeISR(at.Add(wait-time.Millisecond), 5*time.Second); ok {
			t.Fatalf("proposed %v again %v after refusal, before the %v backoff", isr, wait-time.Millisecond, wait)
		}
		at = at.Add(wait)
		fetch(at, 2, 3)
		if isr, _, _, ok := leader.ProposeISR(at, 5*time.Second); !ok || len(isr) != 3 {
			t.Fatalf("%v after refusal: proposal %v, ok %v; want [1 2 3]", wait, isr, ok)
		}
	}
	leader.ProposalFailed(at)
	// Follower 2 lags past the lag time: the shrink goes out despite the backoff.
	if isr, _, _, ok := leader.ProposeISR(at.Add(100*time.Millisecond), time.Millisecond); !ok || !sameMembers(isr, []int32{1}) {
		t.Fatalf("shrink during the backoff: proposal %v, ok %v; want [1]", isr, ok)
	}
	leader.ProposalFailed(at.Add(100 * time.Millisecond))
	// Nobody waited to join at that check, so the next refused growth waits 250 ms again.
	at = at.Add(maxGrowthBackoff)
	fetch(at, 2, 3)
	if isr, _, _, ok := leader.ProposeISR(at, 5*time.Second); !ok || len(isr) != 3 {
		t.Fatalf("after the backoff: proposal %v, ok %v; want [1 2 3]", isr, ok)
	}
	leader.ProposalFailed(at)
	fetch(at.Add(250*time.Millisecond), 2, 3)
	if isr, _, _, ok := leader.ProposeISR(at.Add(250*time.Millisecond), 5*time.Second); !ok || len(isr) != 3 {
		t.Fatalf("250 ms after a first refusal again: proposal %v, ok %v; want [1 2 3]", isr, ok)
	}
	if got := growthBackoff(10); got != maxGrowthBackoff {
		t.Fatalf("backoff after 10 refusals %v, want the cap %v", got, maxGrowthBackoff)
	}
}
