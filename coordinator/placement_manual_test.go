package coordinator

import (
	"errors"
	"slices"
	"testing"
)

func TestCheckManualAssignment(t *testing.T) {
	registered := []int32{1, 2, 3}
	ok := func(assignments [][]int32, first int32, rf int) {
		t.Helper()
		if err := CheckManualAssignment(assignments, registered, first, rf); err != nil {
			t.Errorf("%v (rf %d): %v", assignments, rf, err)
		}
	}
	refused := func(assignments [][]int32, first int32, rf int) {
		t.Helper()
		if err := CheckManualAssignment(assignments, registered, first, rf); !errors.Is(err, ErrInvalidReplicaAssignment) {
			t.Errorf("%v (rf %d): %v, want ErrInvalidReplicaAssignment", assignments, rf, err)
		}
	}
	ok([][]int32{{1}, {2}, {3}}, 0, 0)
	ok([][]int32{{3, 1}, {1, 2}}, 0, 0)
	ok([][]int32{{2, 3, 1}}, 4, 3)
	refused(nil, 0, 0)
	refused([][]int32{{}}, 0, 0)          // empty list
	refused([][]int32{{1}, {}}, 0, 0)     // empty list later
	refused([][]int32{{1, 1}}, 0, 0)      // duplicate
	refused([][]int32{{1, 4}}, 0, 0)      // unregistered broker
	refused([][]int32{{-1}}, 0, 0)        // unregistered broker
	refused([][]int32{{1, 2}, {3}}, 0, 0) // inconsistent replication factor
	refused([][]int32{{1, 2}}, 3, 1)      // not the topic's replication factor
	refused([][]int32{{1}, {2, 3}}, 0, 1) // not the topic's replication factor
}

func TestManualPartitionsLeadOnFirstLiveReplica(t *testing.T) {
	partitions, err := manualPartitions(2, [][]int32{{3, 1, 2}, {1, 2, 3}}, []int32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	first, second := partitions[0], partitions[1]
	if first.Index != 2 || first.Leader != 1 || !slices.Equal(first.Replicas, []int32{3, 1, 2}) || !slices.Equal(first.ISR, []int32{1, 2}) {
		t.Fatalf("partition 2: %+v", first)
	}
	if second.Index != 3 || second.Leader != 1 || !slices.Equal(second.ISR, []int32{1, 2}) {
		t.Fatalf("partition 3: %+v", second)
	}
	if _, err := manualPartitions(0, [][]int32{{3}}, []int32{1, 2}); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatalf("no live replica: %v", err)
	}
}
