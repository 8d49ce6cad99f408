package coordinator

import (
	"slices"
	"testing"
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
