package coordinator

import (
	"fmt"
	"slices"
)

// CheckManualAssignment validates replica lists an administrator chose (CreateTopics and
// CreatePartitions with assignments), as Kafka's controller does. It is pure policy. Every list must
// be non-empty, name only registered brokers, never name a broker twice, and have replicationFactor
// replicas (when replicationFactor is 0, the first list's length sets it for the others). Failures
// wrap ErrInvalidReplicaAssignment and name the partition, first being the index of assignments[0].
func CheckManualAssignment(assignments [][]int32, registered []int32, first int32, replicationFactor int) error {
	if len(assignments) == 0 {
		return fmt.Errorf("%w: no partitions assigned", ErrInvalidReplicaAssignment)
	}
	if replicationFactor == 0 {
		replicationFactor = len(assignments[0])
	}
	for i, replicas := range assignments {
		partition := first + int32(i)
		if len(replicas) == 0 {
			return fmt.Errorf("%w: partition %d has an empty replica list", ErrInvalidReplicaAssignment, partition)
		}
		if len(replicas) != replicationFactor {
			return fmt.Errorf("%w: partition %d has %d replicas, inconsistent with the replication factor %d",
				ErrInvalidReplicaAssignment, partition, len(replicas), replicationFactor)
		}
		for j, broker := range replicas {
			if slices.Contains(replicas[:j], broker) {
				return fmt.Errorf("%w: partition %d names broker %d twice in %v", ErrInvalidReplicaAssignment, partition, broker, replicas)
			}
			if !slices.Contains(registered, broker) {
				return fmt.Errorf("%w: partition %d names broker %d, but no such broker is registered", ErrInvalidReplicaAssignment, partition, broker)
			}
		}
	}
	return nil
}

// manualPartitions places partitions first, first+1, ... on the given replica lists: the leader is
// the first replica that is live, the ISR the live replicas (a fenced one catches up and joins).
// A partition with no live replica is ErrInvalidReplicaAssignment. The lists are copied.
func manualPartitions(first int32, assignments [][]int32, live []int32) ([]Partition, error) {
	partitions := make([]Partition, len(assignments))
	for i, assigned := range assignments {
		replicas := slices.Clone(assigned)
		var isr []int32
		for _, broker := range replicas {
			if slices.Contains(live, broker) {
				isr = append(isr, broker)
			}
		}
		if len(isr) == 0 {
			return nil, fmt.Errorf("%w: partition %d: none of the brokers %v is live", ErrInvalidReplicaAssignment, first+int32(i), replicas)
		}
		partitions[i] = Partition{Index: first + int32(i), Leader: isr[0], Replicas: replicas, ISR: isr}
	}
	return partitions, nil
}
