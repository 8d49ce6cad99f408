package coordinator

import (
	"slices"
	"testing"
	"time"
)

// rebalanceMetadata: p0 led by 2 (prefers 1, ISR [1 2 3]), p1 led by its preferred 1, p2 led by 3
// (prefers 2, ISR [2 3]).
func rebalanceMetadata() *Metadata {
	return &Metadata{
		Brokers: map[int32]Broker{1: {NodeID: 1}, 2: {NodeID: 2}, 3: {NodeID: 3}},
		Topics: map[string]*Topic{"t": {Name: "t", Partitions: []Partition{
			{Index: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 5},
			{Index: 1, Replicas: []int32{1, 3, 2}, ISR: []int32{1, 3, 2}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1},
			{Index: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3}, Leader: 3, LeaderEpoch: 4, PartitionEpoch: 9},
		}}},
	}
}

func TestRebalanceMovesOnlyQuietPartitions(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p0, p2 := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 2}
	m := rebalanceMetadata()
	pending := noteRebalance(m, t0)
	if pending == nil || len(pending.candidates) != 2 {
		t.Fatalf("candidates %+v, want partitions 0 and 2", pending)
	}
	if got := pending.quiet(m, unreachableReports{}); !slices.Equal(got, []TopicPartition{p0, p2}) {
		t.Fatalf("no reports: moving %v, want [t-0 t-2]", got)
	}

	// The chaos case: node 3's replication links were cut just before the note, and its first
	// report reached the controller 1.4 s after it. Every partition with node 3 in its ISR stays.
	reports := unreachableReports{}
	reports.add(UnreachableReport{Follower: 3, Leader: 1}, t0.Add(1400*time.Millisecond))
	if got := pending.quiet(m, reports); got != nil {
		t.Fatalf("node 3 reported leader 1: moving %v, want nothing", got)
	}
	// A report naming node 1 (by node 4, in neither ISR) keeps partition 0 (ISR [1 2 3]), not
	// partition 2 (ISR [2 3]).
	reports = unreachableReports{}
	reports.add(UnreachableReport{Follower: 4, Leader: 1}, t0.Add(-time.Second))
	if got := pending.quiet(m, reports); !slices.Equal(got, []TopicPartition{p2}) {
		t.Fatalf("node 1 reported a second before the note: moving %v, want [t-2]", got)
	}
	// A report from long before the note is history.
	reports = unreachableReports{}
	reports.add(UnreachableReport{Follower: 2, Leader: 1}, t0.Add(-rebalanceQuiet-time.Millisecond))
	if got := pending.quiet(m, reports); !slices.Equal(got, []TopicPartition{p0, p2}) {
		t.Fatalf("a report from before the quiet window: moving %v, want [t-0 t-2]", got)
	}

	// A partition that changed since the note (an ISR change here) waits for the next note.
	changed := rebalanceMetadata()
	changed.Topics["t"].Partitions[0].ISR = []int32{2, 1}
	changed.Topics["t"].Partitions[0].PartitionEpoch++
	if got := pending.quiet(changed, unreachableReports{}); !slices.Equal(got, []TopicPartition{p2}) {
		t.Fatalf("partition 0 changed: moving %v, want [t-2]", got)
	}
	// A preferred replica fenced since the note does not lead.
	fenced := rebalanceMetadata()
	fenced.Brokers[2] = Broker{NodeID: 2, Fenced: true}
	if got := pending.quiet(fenced, unreachableReports{}); !slices.Equal(got, []TopicPartition{p0}) {
		t.Fatalf("node 2 fenced: moving %v, want [t-0]", got)
	}

	balanced := rebalanceMetadata()
	balanced.Topics["t"].Partitions = balanced.Topics["t"].Partitions[1:2]
	if got := noteRebalance(balanced, t0); got != nil {
		t.Fatalf("every preferred replica leads: noted %+v", got)
	}
}
