package coordinator

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestDemotePartition(t *testing.T) {
	all := func(int32) bool { return true }
	p := Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 7}

	next, changed := demotePartition(p, 1, []int32{2, 3}, all)
	if !changed || next.Leader != 2 || !slices.Equal(next.ISR, []int32{2, 3}) || next.LeaderEpoch != 5 || next.PartitionEpoch != 8 {
		t.Fatalf("both followers report the leader: got %+v", next)
	}
	if _, changed := demotePartition(p, 1, []int32{2}, all); changed {
		t.Fatal("one of two followers reporting must not move leadership (the other still reaches the leader)")
	}
	if _, changed := demotePartition(p, 2, []int32{1, 3}, all); changed {
		t.Fatal("a node that does not lead the partition is not demoted from it")
	}
	alone := Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1}, Leader: 1}
	if _, changed := demotePartition(alone, 1, []int32{2, 3}, all); changed {
		t.Fatal("reporters outside the ISR may not lead: that would be unclean")
	}
	notLive := func(id int32) bool { return id != 3 }
	if _, changed := demotePartition(p, 1, []int32{2, 3}, notLive); changed {
		t.Fatal("a fenced reporter does not count")
	}
	partial := Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 1}
	if next, changed := demotePartition(partial, 1, []int32{2, 3}, all); !changed || next.Leader != 3 || !slices.Equal(next.ISR, []int32{3}) {
		t.Fatalf("the only other ISR member reports: got %+v", next)
	}
}

func TestUnreachableReportsSettleAndWeighReporters(t *testing.T) {
	t0 := time.Unix(1000, 0)
	repeat := t0.Add(500 * time.Millisecond)
	r := unreachableReports{}
	r.add(UnreachableReport{Follower: 2, Leader: 1}, t0)
	if got := r.reporters(1, t0, unreachableSettle); got != nil {
		t.Fatalf("a first report counts as settled at once: %v", got)
	}
	if got := r.reporters(1, t0, 0); !slices.Equal(got, []int32{2}) {
		t.Fatalf("a first report, unsettled: reporters %v, want [2]", got)
	}
	r.add(UnreachableReport{Follower: 2, Leader: 1}, repeat)
	if got := r.reporters(1, repeat, unreachableSettle); !slices.Equal(got, []int32{2}) {
		t.Fatalf("a repeated report: reporters %v, want [2]", got)
	}
	later := t0.Add(3 * time.Second)
	if got := r.reporters(1, later, 0); got != nil {
		t.Fatalf("a report older than the TTL still counts: %v", got)
	}
	r.add(UnreachableReport{Follower: 2, Leader: 1}, later)
	if got := r.reporters(1, later, unreachableSettle); got != nil {
		t.Fatalf("a report after a silence longer than the TTL counts as settled: %v", got)
	}

	// Node 3's replication links are cut. It reports leader 1, and nodes 1 and 2 report node 3,
	// all within milliseconds; node 3's report arrives first.
	r = unreachableReports{}
	r.add(UnreachableReport{Follower: 3, Leader: 1}, t0)
	if got := r.reporters(1, t0, 0); !slices.Equal(got, []int32{3}) {
		t.Fatalf("node 3's report alone: reporters %v, want [3]", got)
	}
	r.add(UnreachableReport{Follower: 1, Leader: 3}, t0.Add(3*time.Millisecond))
	r.add(UnreachableReport{Follower: 2, Leader: 3}, t0.Add(3*time.Millisecond))
	r.add(UnreachableReport{Follower: 3, Leader: 1}, repeat)
	if got := r.reporters(1, repeat, unreachableSettle); got != nil {
		t.Fatalf("node 3, reported by two followers, counts against leader 1, reported by one: %v", got)
	}
	r.add(UnreachableReport{Follower: 1, Leader: 3}, repeat)
	r.add(UnreachableReport{Follower: 2, Leader: 3}, repeat)
	if got := r.reporters(3, repeat, unreachableSettle); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("reports of node 3: reporters %v, want [1 2]", got)
	}

	// Two nodes that each report the other, one each: neither report counts.
	r = unreachableReports{}
	r.add(UnreachableReport{Follower: 1, Leader: 2}, t0)
	r.add(UnreachableReport{Follower: 2, Leader: 1}, t0)
	if got := r.reporters(1, repeat, 0); got != nil {
		t.Fatalf("mutual reports: reporters %v, want none", got)
	}
}

// TestShrinkRefusedWhileReportersWouldTakeOver: a leader whose followers report it unreachable may
// not drop them from its ISR while their reports would move its leadership to them (it would do so
// after the lag time, before the reports settle, and then nobody could take over); once the
// reports turn out to come from a cut-off follower, it may.
func TestShrinkRefusedWhileReportersWouldTakeOver(t *testing.T) {
	c := openWithBrokers(t, 3)
	ctx := testContext(t)
	mustCreate(t, c, "reported", 1, 3, nil)
	p := c.Metadata().Topics["reported"].Partitions[0]
	leader := p.Leader
	others := withoutMember(p.ISR, leader)
	f, g := others[0], others[1]
	alter := func(isr ...int32) error {
		current := c.Metadata().Topics["reported"].Partitions[0]
		next, err := c.AlterPartition(ctx, "reported", 0, leader, current.LeaderEpoch, current.PartitionEpoch, isr)
		if err == nil && !sameMembers(next.ISR, isr) {
			t.Fatalf("ISR %v after proposing %v", next.ISR, isr)
		}
		return err
	}
	report := func(at time.Time, reports ...UnreachableReport) {
		c.liveness.mu.Lock()
		defer c.liveness.mu.Unlock()
		if c.liveness.unreachable == nil {
			c.liveness.unreachable = unreachableReports{}
		}
		for _, r := range reports {
			c.liveness.unreachable.add(r, at)
		}
	}
	now := time.Now()

	// Both followers report the leader (not yet settled): dropping either is refused; dropping
	// one while only the other reports is not (that report alone moves nothing).
	report(now, UnreachableReport{Follower: f, Leader: leader}, UnreachableReport{Follower: g, Leader: leader})
	if err := alter(leader); !errors.Is(err, ErrInvalidISR) {
		t.Fatalf("shrink to the leader alone while both followers report it: %v, want ErrInvalidISR", err)
	}
	c.liveness.mu.Lock()
	c.liveness.unreachable = nil
	c.liveness.mu.Unlock()
	report(now, UnreachableReport{Follower: f, Leader: leader})
	if err := alter(leader, f); err != nil {
		t.Fatalf("dropping %d while only %d reports the leader: %v", g, f, err)
	}

	// ISR [leader f]; f reports the leader, credibly: dropping f is refused.
	if err := alter(leader); !errors.Is(err, ErrInvalidISR) {
		t.Fatalf("dropping the only other member, which reports the leader: %v, want ErrInvalidISR", err)
	}
	// The leader and g report f: f is the one cut off, and the leader may drop it.
	report(time.Now(), UnreachableReport{Follower: leader, Leader: f}, UnreachableReport{Follower: g, Leader: f})
	if err := alter(leader); err != nil {
		t.Fatalf("dropping a follower that more nodes report than it reports: %v", err)
	}
}

// TestSettleSkippedForALeaderThatMissedHeartbeats: reports of a leader that still heartbeats move
// nothing until they settle (its replication links may be what is cut, and its own reports may
// be on their way); reports of a leader that has missed its heartbeats too, or of the controller
// this one took over from, move leadership at once. Chaos run seed 1796238540443560554: the
// paused controller led four partitions, and the 400 ms settle was pure wait.
func TestSettleSkippedForALeaderThatMissedHeartbeats(t *testing.T) {
	config := testConfig(t.TempDir())
	config.BrokerSessionTimeout = time.Hour // no fencing: only the reports may move leadership
	c := openTest(t, config)
	ctx := testContext(t)
	for id := int32(1); id <= 3; id++ {
		if err := c.RegisterBroker(ctx, Broker{NodeID: id, Host: "127.0.0.1", Port: 9090 + id}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, c, "silent", 3, 3, nil)
	partitions := c.Metadata().Topics["silent"].Partitions
	i := slices.IndexFunc(partitions, func(p Partition) bool { return p.Leader != config.NodeID })
	if i < 0 {
		t.Fatalf("the controller leads every partition: %+v", partitions)
	}
	leader := partitions[i].Leader
	others := withoutMember(partitions[i].ISR, leader)
	lastHeard := func(at time.Time) {
		for {
			c.liveness.mu.Lock()
			started := c.liveness.lastSeen != nil
			if started {
				c.liveness.lastSeen[leader] = at
				c.liveness.unreachable = nil
			}
			c.liveness.mu.Unlock()
			if started {
				return
			}
			select { // the liveness loop starts the sessions on its first tick
			case <-ctx.Done():
				t.Fatal("the controller never started its broker sessions")
			case <-time.After(config.BrokerHeartbeatInterval / 4):
			}
		}
	}
	reportAll := func() int32 {
		for _, f := range others {
			if _, err := c.unreachableLeaderReported(ctx, UnreachableReport{Follower: f, Leader: leader}); err != nil {
				t.Fatal(err)
			}
		}
		return c.Metadata().Topics["silent"].Partitions[i].Leader
	}

	lastHeard(time.Now().Add(time.Hour)) // heartbeating throughout the test
	if got := reportAll(); got != leader {
		t.Fatalf("first reports of a heartbeating leader moved leadership to %d", got)
	}
	lastHeard(time.Now().Add(-3 * config.BrokerHeartbeatInterval))
	if got := reportAll(); !slices.Contains(others, got) {
		t.Fatalf("reports of a leader that missed its heartbeats: leader %d, want one of %v", got, others)
	}

	c.liveness.mu.Lock()
	defer c.liveness.mu.Unlock()
	takeover := c.liveness.takeover
	c.liveness.lastSeen[leader] = takeover
	c.liveness.deposed = leader
	if !c.heartbeatsMissed(leader, takeover.Add(time.Millisecond)) {
		t.Fatal("the deposed controller, unheard since the takeover, counts as heartbeating")
	}
	if c.heartbeatsMissed(config.NodeID, time.Now().Add(time.Hour)) {
		t.Fatal("the controller counts itself as missing heartbeats")
	}
}
