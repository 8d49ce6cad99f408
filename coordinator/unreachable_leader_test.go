package coordinator

import (
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
	r := unreachableReports{}
	if got := r.add(UnreachableReport{Follower: 2, Leader: 1}, t0); got != nil {
		t.Fatalf("a first report moved leadership at once: %v", got)
	}
	if got := r.add(UnreachableReport{Follower: 2, Leader: 1}, t0.Add(500*time.Millisecond)); !slices.Equal(got, []int32{2}) {
		t.Fatalf("a repeated report: reporters %v, want [2]", got)
	}
	if got := r.add(UnreachableReport{Follower: 2, Leader: 1}, t0.Add(3*time.Second)); got != nil {
		t.Fatalf("a report after a silence longer than the TTL counts as a first one: got %v", got)
	}

	// Node 3's replication links are cut. It reports leader 1; nodes 1 and 2 report leader 3,
	// all within milliseconds, and node 3's report arrives first.
	r = unreachableReports{}
	for _, report := range []UnreachableReport{{3, 1}, {1, 3}, {2, 3}} {
		if got := r.add(report, t0); got != nil {
			t.Fatalf("first report %+v moved leadership: %v", report, got)
		}
	}
	repeat := t0.Add(500 * time.Millisecond)
	if got := r.add(UnreachableReport{Follower: 3, Leader: 1}, repeat); got != nil {
		t.Fatalf("node 3, reported by two followers, got leader 1 (reported by one) demoted: reporters %v", got)
	}
	if got := r.add(UnreachableReport{Follower: 1, Leader: 3}, repeat); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("reports of node 3: reporters %v, want [1 2]", got)
	}

	// Two nodes that each report the other, one each: both reports stand (the old behaviour).
	r = unreachableReports{}
	r.add(UnreachableReport{Follower: 1, Leader: 2}, t0)
	r.add(UnreachableReport{Follower: 2, Leader: 1}, t0)
	if got := r.add(UnreachableReport{Follower: 2, Leader: 1}, repeat); !slices.Equal(got, []int32{2}) {
		t.Fatalf("mutual reports: reporters %v, want [2]", got)
	}
}
