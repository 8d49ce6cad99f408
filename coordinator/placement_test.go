package coordinator

import (
	"errors"
	"slices"
	"testing"
)

// TestAssignReplicasExhaustive checks every small combination of broker
// count, replication factor, partition count, first partition and start
// index against the placement rules.
func TestAssignReplicasExhaustive(t *testing.T) {
	for brokerCount := 1; brokerCount <= 6; brokerCount++ {
		brokerIDs := make([]int32, brokerCount)
		for i := range brokerIDs {
			brokerIDs[i] = int32(10 + 3*i) // sparse ids: placement must not assume 0..n-1
		}
		for replicationFactor := 1; replicationFactor <= brokerCount; replicationFactor++ {
			for partitionCount := int32(0); partitionCount <= 13; partitionCount++ {
				for first := int32(0); first <= 4; first++ {
					for start := -brokerCount; start < 2*brokerCount; start++ {
						assignments, err := AssignReplicas(brokerIDs, first, partitionCount, replicationFactor, start)
						if err != nil {
							t.Fatalf("n=%d rf=%d count=%d first=%d start=%d: %v", brokerCount, replicationFactor, partitionCount, first, start, err)
						}
						checkAssignments(t, brokerIDs, first, partitionCount, replicationFactor, start, assignments)
					}
				}
			}
		}
	}
}

func checkAssignments(t *testing.T, brokerIDs []int32, first, partitionCount int32, replicationFactor, start int, assignments [][]int32) {
	t.Helper()
	brokerCount := len(brokerIDs)
	if int32(len(assignments)) != partitionCount {
		t.Fatalf("got %d assignments, want %d", len(assignments), partitionCount)
	}
	leaderCounts := map[int32]int{}
	normalizedStart := ((start % brokerCount) + brokerCount) % brokerCount
	for i, replicas := range assignments {
		partition := int(first) + i
		if len(replicas) != replicationFactor {
			t.Fatalf("partition %d: %d replicas, want %d", partition, len(replicas), replicationFactor)
		}
		seen := map[int32]bool{}
		for r, broker := range replicas {
			if seen[broker] {
				t.Fatalf("partition %d: broker %d twice in %v", partition, broker, replicas)
			}
			seen[broker] = true
			// Consecutive on the ring, starting at the round-robin leader.
			if want := brokerIDs[(normalizedStart+partition+r)%brokerCount]; broker != want {
				t.Fatalf("partition %d replica %d: broker %d, want %d (start %d, %v)", partition, r, broker, want, start, replicas)
			}
		}
		leaderCounts[replicas[0]]++
	}
	// Leaders are balanced within one partition per broker.
	if partitionCount > 0 {
		low, high := int(partitionCount), 0
		for _, broker := range brokerIDs {
			low, high = min(low, leaderCounts[broker]), max(high, leaderCounts[broker])
		}
		if high-low > 1 {
			t.Fatalf("leader counts %v are unbalanced for %d partitions on %d brokers", leaderCounts, partitionCount, brokerCount)
		}
	}
}

func TestAssignReplicasContinuesRotation(t *testing.T) {
	brokerIDs := []int32{1, 2, 3, 4}
	whole, err := AssignReplicas(brokerIDs, 0, 7, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	head, err := AssignReplicas(brokerIDs, 0, 3, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	tail, err := AssignReplicas(brokerIDs, 3, 4, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	joined := append(head, tail...)
	for i := range whole {
		if !slices.Equal(whole[i], joined[i]) {
			t.Fatalf("partition %d: %v in one go, %v when added later", i, whole[i], joined[i])
		}
	}
}

func TestAssignReplicasRefuses(t *testing.T) {
	refuses := func(brokerIDs []int32, first, count int32, replicationFactor int, want error) {
		t.Helper()
		if _, err := AssignReplicas(brokerIDs, first, count, replicationFactor, 0); !errors.Is(err, want) {
			t.Fatalf("AssignReplicas(%v, %d, %d, %d) = %v, want %v", brokerIDs, first, count, replicationFactor, err, want)
		}
	}
	refuses(nil, 0, 1, 1, ErrInvalidReplicationFactor)
	refuses([]int32{1, 2}, 0, 1, 3, ErrInvalidReplicationFactor)
	refuses([]int32{1, 2}, 0, 1, 0, ErrInvalidReplicationFactor)
	refuses([]int32{1, 2}, 0, -1, 1, ErrInvalidPartitions)
	refuses([]int32{1, 2}, -1, 1, 1, ErrInvalidPartitions)
	if _, err := AssignReplicas([]int32{2, 1}, 0, 1, 1, 0); err == nil {
		t.Fatal("unsorted broker ids were accepted")
	}
	if _, err := AssignReplicas([]int32{1, 1}, 0, 1, 1, 0); err == nil {
		t.Fatal("duplicate broker ids were accepted")
	}
}
