package coordinator

import (
	"errors"
	"slices"
	"testing"
)

func TestResignLeader(t *testing.T) {
	state := emptyMetadata()
	for id := int32(1); id <= 3; id++ {
		state = state.withBroker(Broker{NodeID: id, Host: "h", Port: 1, Fenced: id == 2})
	}
	topic := &Topic{Name: "t", ID: [16]byte{1}, Partitions: []Partition{
		{Index: 0, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
		{Index: 1, Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}},
	}}
	state = state.withTopic("t", topic)
	resign := func(partition, leader, leaderEpoch int32) (*Metadata, error) {
		next, result := (&resignLeaderCommand{topicReference: topicReference{Name: "t", ID: [16]byte{1}},
			Partition: partition, LeaderID: leader, LeaderEpoch: leaderEpoch}).apply(state)
		return next, result.err
	}
	if _, err := resign(0, 1, 1); !errors.Is(err, ErrStalePartitionEpoch) {
		t.Fatalf("stale leader epoch: %v", err)
	}
	if _, err := resign(0, 3, 2); !errors.Is(err, ErrStalePartitionEpoch) {
		t.Fatalf("not the leader: %v", err)
	}
	// Node 2 is fenced: partition 1 has no other live in-sync replica and keeps its leader.
	if next, err := resign(1, 1, 0); !errors.Is(err, ErrEligibleLeadersNotAvailable) || next != nil {
		t.Fatalf("no eligible leader: %v, %v", next, err)
	}
	next, err := resign(0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := next.Topics["t"].Partitions[0]
	if got.Leader != 3 || got.LeaderEpoch != 3 || got.PartitionEpoch != 6 || !slices.Equal(got.ISR, []int32{2, 3}) {
		t.Fatalf("resigned: %+v; want leader 3 (2 is fenced) at epoch 3, ISR [2 3]", got)
	}
	if !slices.Equal(state.Topics["t"].Partitions[0].ISR, []int32{1, 2, 3}) {
		t.Fatal("the old state changed")
	}
}
