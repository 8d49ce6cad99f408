package coordinator

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestElectLeader(t *testing.T) {
	live := func(ids ...int32) func(int32) bool { return func(id int32) bool { return slices.Contains(ids, id) } }
	check := func(name string, replicas, isr []int32, alive func(int32) bool, unclean bool, wantLeader int32, wantISR []int32, wantUnclean bool) {
		t.Helper()
		leader, newISR, wasUnclean := electLeader(replicas, isr, alive, unclean)
		if leader != wantLeader || !slices.Equal(newISR, wantISR) || wasUnclean != wantUnclean {
			t.Errorf("%s: got %d %v %v, want %d %v %v", name, leader, newISR, wasUnclean, wantLeader, wantISR, wantUnclean)
		}
	}
	check("preferred first", []int32{1, 2, 3}, []int32{3, 2, 1}, live(1, 2, 3), false, 1, []int32{3, 2, 1}, false)
	check("next live in-sync replica", []int32{1, 2, 3}, []int32{1, 3}, live(2, 3), false, 3, []int32{1, 3}, false)
	check("no live ISR member: offline", []int32{1, 2, 3}, []int32{1}, live(2, 3), false, -1, []int32{1}, false)
	check("unclean takes a live replica", []int32{1, 2, 3}, []int32{1}, live(2, 3), true, 2, []int32{2}, true)
	check("nobody live", []int32{1, 2}, []int32{1, 2}, live(), true, -1, []int32{1, 2}, false)
}

func TestFencePartition(t *testing.T) {
	live := func(id int32) bool { return id != 1 }
	p := Partition{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	next, changed, _ := fencePartition(p, 1, live, false)
	if !changed || next.Leader != 2 || next.LeaderEpoch != 5 || next.PartitionEpoch != 10 || !slices.Equal(next.ISR, []int32{2, 3}) {
		t.Fatalf("fencing the leader: %+v", next)
	}
	follower, changed, _ := fencePartition(p, 3, func(id int32) bool { return id != 3 }, false)
	if !changed || follower.Leader != 1 || follower.LeaderEpoch != 4 || !slices.Equal(follower.ISR, []int32{1, 2}) {
		t.Fatalf("fencing a follower: %+v", follower)
	}
	last := Partition{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1}}
	offline, changed, _ := fencePartition(last, 1, live, false)
	if !changed || offline.Leader != -1 || !slices.Equal(offline.ISR, []int32{1}) || offline.LeaderEpoch != 1 {
		t.Fatalf("fencing the last ISR member: %+v", offline)
	}
	revived, changed, _ := reviveOffline(offline, func(int32) bool { return true }, false)
	if !changed || revived.Leader != 1 || revived.LeaderEpoch != 2 {
		t.Fatalf("reviving: %+v", revived)
	}
	if _, changed, _ := fencePartition(p, 7, live, false); changed {
		t.Fatal("a non-replica changed the partition")
	}
}

func TestAlterPartitionChecksEpochs(t *testing.T) {
	state := emptyMetadata()
	for id := int32(1); id <= 3; id++ {
		state = state.withBroker(Broker{NodeID: id, Host: "h", Port: 1})
	}
	topic := &Topic{Name: "t", ID: [16]byte{1}, Partitions: []Partition{{Index: 0, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}}}
	state = state.withTopic("t", topic)
	alter := func(leader, leaderEpoch, partitionEpoch int32, isr ...int32) (*Metadata, error) {
		next, result := (&alterPartitionCommand{topicReference: topicReference{Name: "t", ID: [16]byte{1}},
			LeaderID: leader, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr}).apply(state)
		return next, result.err
	}
	if _, err := alter(1, 2, 4, 1, 2); !errors.Is(err, ErrStalePartitionEpoch) {
		t.Fatalf("stale partition epoch: %v", err)
	}
	if _, err := alter(2, 2, 5, 2); !errors.Is(err, ErrStalePartitionEpoch) {
		t.Fatalf("not the leader: %v", err)
	}
	if _, err := alter(1, 2, 5, 2, 3); !errors.Is(err, ErrInvalidISR) {
		t.Fatalf("ISR without the leader: %v", err)
	}
	if _, err := alter(1, 2, 5, 1, 4); !errors.Is(err, ErrInvalidISR) {
		t.Fatalf("non-replica: %v", err)
	}
	next, err := alter(1, 2, 5, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := next.Topics["t"].Partitions[0]
	if !slices.Equal(got.ISR, []int32{1, 3}) || got.PartitionEpoch != 6 || got.LeaderEpoch != 2 {
		t.Fatalf("applied: %+v", got)
	}
	// A fenced broker may not join.
	fenced := Broker{NodeID: 2, Host: "h", Port: 1, Fenced: true}
	state = next.withBroker(fenced)
	if _, err := alter(1, 2, 6, 1, 2, 3); !errors.Is(err, ErrInvalidISR) {
		t.Fatalf("fenced broker joined: %v", err)
	}
}

// TestClusterFencesASilentBroker: a broker that stops heartbeating loses its leaderships to an
// in-sync replica at a new epoch and leaves the ISRs; back, it is unfenced.
func TestClusterFencesASilentBroker(t *testing.T) {
	tc := startCluster(t, 3)
	registerWithSessions(t, tc, 3)
	controller := tc.controller()
	if _, err := controller.CreateTopic(testContext(t), "fenced", 3, 3, nil, false); err != nil {
		t.Fatal(err)
	}
	victim := tc.follower().NodeID()
	before := awaitMetadata(t, controller, "topic created", func(m *Metadata) bool { return m.Topics["fenced"] != nil }).Topics["fenced"]
	tc.stop(victim)
	after := awaitMetadata(t, controller, "victim fenced", func(m *Metadata) bool { return m.Brokers[victim].Fenced })
	topic := after.Topics["fenced"]
	for i, p := range topic.Partitions {
		old := before.Partitions[i]
		if p.Leader == victim || slices.Contains(p.ISR, victim) {
			t.Fatalf("partition %d still has the fenced broker: %+v", i, p)
		}
		if old.Leader == victim && (p.LeaderEpoch != old.LeaderEpoch+1 || p.Leader < 0) {
			t.Fatalf("partition %d: leader moved from %d at %d to %d at %d", i, old.Leader, old.LeaderEpoch, p.Leader, p.LeaderEpoch)
		}
	}
	if slices.Contains(after.LiveBrokerIDs(), victim) {
		t.Fatal("fenced broker listed live")
	}
	back := tc.restart(victim)
	back.StartSession(back.Metadata().Brokers[victim])
	awaitMetadata(t, controller, "victim unfenced", func(m *Metadata) bool { return !m.Brokers[victim].Fenced })
}

func TestClusterShutdownBrokerMovesLeadership(t *testing.T) {
	tc := startCluster(t, 3)
	registerWithSessions(t, tc, 3)
	follower := tc.follower()
	if _, err := follower.CreateTopic(testContext(t), "moving", 3, 3, nil, false); err != nil {
		t.Fatal(err)
	}
	leaving := follower.NodeID()
	if err := follower.ShutdownBroker(testContext(t), leaving); err != nil {
		t.Fatal(err)
	}
	m := follower.Metadata()
	for _, p := range m.Topics["moving"].Partitions {
		if p.Leader == leaving || slices.Contains(p.ISR, leaving) {
			t.Fatalf("after shutdown: %+v", p)
		}
	}
	// Preferred election brings nothing back while it is fenced.
	results, err := follower.ElectPreferredLeaders(testContext(t), []TopicPartition{{Topic: "moving", Partition: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if err := results[TopicPartition{Topic: "moving", Partition: 0}]; err == nil {
		// Partition 0's preferred replica may be another node; then the election is not needed.
		t.Logf("partition 0 election: elected")
	}
}

// TestClusterFencingSurvivesControllerChange: a broker falls silent (its process and Raft stay up,
// its heartbeats stop) and the controller is killed before the broker's session runs out. The new
// controller, which never heard from the silent broker, fences it and the killed controller's
// broker, moves their leaderships to the survivors at new epochs, keeps the brokers that heartbeat
// to it unfenced, and unfences both when they are back.
func TestClusterFencingSurvivesControllerChange(t *testing.T) {
	// A session longer than the default, so that killing the controller surely happens within the
	// silent broker's session and the survivors' heartbeats reach the new controller in time even
	// on a busy machine.
	tc := startClusterWith(t, 3, func(c *Config) { c.BrokerSessionTimeout = 3 * time.Second })
	const silent = int32(4) // a non-voter: losing it and the controller leaves the voters a quorum
	if err := tc.open(tc.nodeConfig(silent)); err != nil {
		t.Fatal(err)
	}
	registerWithSessions(t, tc, 4)
	old := tc.controller()
	killed := old.NodeID()
	// Four partitions of three replicas over four brokers: every broker leads one.
	if _, err := old.CreateTopic(testContext(t), "survives", 4, 3, nil, false); err != nil {
		t.Fatal(err)
	}
	before := old.Metadata().Topics["survives"]

	tc.node(silent).stopSession()
	if m := old.Metadata(); m.Brokers[silent].Fenced {
		t.Fatalf("broker %d fenced before the controller was killed: %+v", silent, m.Brokers[silent])
	}
	tc.stop(killed)

	controller := tc.controller()
	gone := func(id int32) bool { return id == silent || id == killed }
	after := awaitMetadata(t, controller, "the silent broker and the killed controller fenced", func(m *Metadata) bool {
		return m.Brokers[silent].Fenced && m.Brokers[killed].Fenced
	})
	for _, id := range after.BrokerIDs() {
		if !gone(id) && after.Brokers[id].Fenced {
			t.Fatalf("broker %d, which heartbeats to the new controller %d, is fenced", id, controller.NodeID())
		}
	}
	for i, p := range after.Topics["survives"].Partitions {
		was := before.Partitions[i]
		if p.Leader < 0 || gone(p.Leader) || slices.ContainsFunc(p.ISR, gone) {
			t.Fatalf("partition %d after fencing %d and %d: %+v", i, silent, killed, p)
		}
		if gone(was.Leader) && p.LeaderEpoch <= was.LeaderEpoch {
			t.Fatalf("partition %d: leader moved from %d to %d without a new epoch (%d -> %d)",
				i, was.Leader, p.Leader, was.LeaderEpoch, p.LeaderEpoch)
		}
	}

	// Both come back (the silent broker's session was stopped for good: it restarts) and are
	// unfenced by the new controller.
	tc.stop(silent)
	for _, id := range []int32{silent, killed} {
		back := tc.restart(id)
		back.StartSession(back.Metadata().Brokers[id])
	}
	awaitMetadata(t, controller, "both brokers unfenced", func(m *Metadata) bool {
		return len(m.LiveBrokerIDs()) == 4
	})
}

// TestRestartedBrokerIsFencedAsItRegisters: a broker registering with a new incarnation (its process
// restarted, perhaps with a shorter log) loses its leaderships at new epochs and its ISR places, so
// it never leads again at an epoch it led before; re-registering the same incarnation changes
// nothing.
func TestRestartedBrokerIsFencedAsItRegisters(t *testing.T) {
	state := emptyMetadata()
	apply := func(c command) {
		t.Helper()
		next, result := c.apply(state)
		if result.err != nil {
			t.Fatal(result.err)
		}
		if next != nil {
			state = next
		}
	}
	for id := int32(1); id <= 3; id++ {
		apply(&registerBrokerCommand{Broker: Broker{NodeID: id, Host: "h", Port: 9090 + id, Incarnation: "first"}})
	}
	apply(&createTopicCommand{Topic: &Topic{Name: "t", ID: newTopicID(), Partitions: []Partition{
		{Index: 0, Leader: 1, LeaderEpoch: 22, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
		{Index: 1, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1}, ISR: []int32{1}},
	}}})
	before := state
	apply(&registerBrokerCommand{Broker: Broker{NodeID: 1, Host: "h", Port: 9091, Incarnation: "first"}})
	if state != before {
		t.Fatal("re-registering the same incarnation changed the metadata")
	}
	apply(&registerBrokerCommand{Broker: Broker{NodeID: 1, Host: "h", Port: 9091, Incarnation: "second"}})
	if b := state.Brokers[1]; !b.Fenced || b.Incarnation != "second" {
		t.Fatalf("restarted broker registered as %+v, want fenced with the new incarnation", b)
	}
	p := state.Topics["t"].Partitions[0]
	if p.Leader == 1 || p.LeaderEpoch != 23 || slices.Contains(p.ISR, 1) {
		t.Fatalf("partition led by the restarted broker: %+v, want another leader at epoch 23 and node 1 out of the ISR", p)
	}
	alone := state.Topics["t"].Partitions[1]
	if alone.Leader != -1 || alone.LeaderEpoch != 4 {
		t.Fatalf("partition with the restarted broker as its only replica: %+v, want offline at epoch 4", alone)
	}
	apply(&unfenceBrokerCommand{NodeID: 1})
	if revived := state.Topics["t"].Partitions[1]; revived.Leader != 1 || revived.LeaderEpoch != 5 {
		t.Fatalf("after its heartbeat: %+v, want node 1 leading at epoch 5", revived)
	}
}

// A proposed ISR growth that names a fenced broker keeps its live joiners (the fenced one is
// dropped) instead of being refused whole; one that adds only fenced brokers is refused.
func TestWithoutFencedJoiners(t *testing.T) {
	live := func(id int32) bool { return id != 1 }
	got, err := withoutFencedJoiners([]int32{3, 1, 2}, []int32{3}, live)
	if err != nil || !slices.Equal(got, []int32{3, 2}) {
		t.Fatalf("growth with a fenced joiner: %v, %v; want [3 2]", got, err)
	}
	got, err = withoutFencedJoiners([]int32{3, 1}, []int32{3, 1}, live)
	if err != nil || !slices.Equal(got, []int32{3, 1}) {
		t.Fatalf("a fenced member already in the ISR stays until it is shrunk away: %v, %v", got, err)
	}
	if got, err := withoutFencedJoiners([]int32{3, 1}, []int32{3}, live); err == nil {
		t.Fatalf("growth by a fenced broker only: %v, want an error", got)
	}
	got, err = withoutFencedJoiners([]int32{3}, []int32{3, 2}, live)
	if err != nil || !slices.Equal(got, []int32{3}) {
		t.Fatalf("a shrink: %v, %v", got, err)
	}
}
