package coordinator

import "fmt"

// AssignReplicas decides which brokers hold partitions firstPartition ..
// firstPartition+partitionCount-1 of a topic. It is pure policy: no I/O, no
// randomness, no clock.
//
// Leaders go round-robin over the ring of brokers, and each partition's
// followers are the brokers that follow its leader on the ring:
//
//	leader(p)     = brokerIDs[(startIndex + p) mod n]
//	replica(p, r) = brokerIDs[(startIndex + p + r) mod n]   for r in [0, replicationFactor)
//
// so replica lists never repeat a broker and the first replica is the
// preferred leader. Partitions are numbered absolutely, so adding partitions
// later with the same startIndex continues the same rotation.
//
// brokerIDs must be sorted ascending without duplicates; replicationFactor
// must lie in [1, len(brokerIDs)]; partitionCount and firstPartition must not
// be negative. startIndex is taken modulo len(brokerIDs).
func AssignReplicas(brokerIDs []int32, firstPartition, partitionCount int32, replicationFactor int, startIndex int) ([][]int32, error) {
	brokerCount := len(brokerIDs)
	for i := 1; i < brokerCount; i++ {
		if brokerIDs[i-1] >= brokerIDs[i] {
			return nil, fmt.Errorf("coordinator: broker ids %v are not sorted and distinct", brokerIDs)
		}
	}
	if replicationFactor < 1 || replicationFactor > brokerCount {
		return nil, fmt.Errorf("%w: replication factor %d with %d registered brokers",
			ErrInvalidReplicationFactor, replicationFactor, brokerCount)
	}
	if partitionCount < 0 || firstPartition < 0 {
		return nil, fmt.Errorf("%w: partitions [%d, %d+%d)", ErrInvalidPartitions, firstPartition, firstPartition, partitionCount)
	}
	start := startIndex % brokerCount
	if start < 0 {
		start += brokerCount
	}
	assignments := make([][]int32, partitionCount)
	// One backing array for all replica lists: a topic's assignment is
	// allocated once.
	backing := make([]int32, int(partitionCount)*replicationFactor)
	for i := range assignments {
		partition := int(firstPartition) + i
		replicas := backing[i*replicationFactor : (i+1)*replicationFactor : (i+1)*replicationFactor]
		for r := range replicas {
			replicas[r] = brokerIDs[(start+partition+r)%brokerCount]
		}
		assignments[i] = replicas
	}
	return assignments, nil
}
