package coordinator

import (
	"errors"
	"slices"
	"testing"
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
	registerAll(t, tc)
	for id := int32(1); id <= 3; id++ {
		c := tc.node(id)
		c.StartSession(c.Metadata().Brokers[id])
	}
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
	registerAll(t, tc)
	for id := int32(1); id <= 3; id++ {
		c := tc.node(id)
		c.StartSession(c.Metadata().Brokers[id])
	}
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
