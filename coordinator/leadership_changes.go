package coordinator

// The change methods behind leadership: ISR changes from partition leaders, controlled shutdown and
// preferred leader election. Each works on any node (forwarded to the controller, call.go).

import (
	"context"
	"fmt"
	"slices"
)

// AlterPartition proposes a partition leader's ISR change, based on the leader and partition
// epochs the leader last saw. It returns the partition as changed. Stale epochs fail with
// ErrStalePartitionEpoch, a malformed ISR with ErrInvalidISR.
func (c *Coordinator) AlterPartition(ctx context.Context, topic string, partition, leaderID, leaderEpoch, partitionEpoch int32, isr []int32) (Partition, error) {
	return callController(c, ctx, opAlterPartition, alterPartitionArgs{
		Topic: topic, Partition: partition, LeaderID: leaderID, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: isr,
	}, c.alterPartition)
}

type alterPartitionArgs struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	LeaderID       int32   `json:"leaderID"`
	LeaderEpoch    int32   `json:"leaderEpoch"`
	PartitionEpoch int32   `json:"partitionEpoch"`
	ISR            []int32 `json:"isr"`
}

func (c *Coordinator) alterPartition(ctx context.Context, args alterPartitionArgs) (Partition, error) {
	if err := c.checkLeader(ctx); err != nil {
		return Partition{}, err
	}
	topic, ok := c.Metadata().Topics[args.Topic]
	if !ok {
		return Partition{}, fmt.Errorf("%w: %q", ErrUnknownTopic, args.Topic)
	}
	isr := slices.Clone(args.ISR)
	if args.Partition >= 0 && int(args.Partition) < len(topic.Partitions) {
		var err error
		current := topic.Partitions[args.Partition]
		if isr, err = withoutFencedJoiners(isr, current.ISR, liveIn(c.Metadata())); err != nil {
			return Partition{}, fmt.Errorf("%w: %s-%d: %v", ErrInvalidISR, args.Topic, args.Partition, err)
		}
		if current.Leader == args.LeaderID {
			if err := c.checkShrinkNotPreempted(current, args.LeaderID, isr); err != nil {
				return Partition{}, fmt.Errorf("coordinator: ISR change of %s-%d: %w", args.Topic, args.Partition, err)
			}
		}
	}
	result, err := c.propose(ctx, &alterPartitionCommand{
		topicReference: topicReference{Name: args.Topic, ID: topic.ID},
		Partition:      args.Partition, LeaderID: args.LeaderID, LeaderEpoch: args.LeaderEpoch,
		PartitionEpoch: args.PartitionEpoch, ISR: isr,
	})
	return result.partition, err
}

// ShutdownBroker is a controlled shutdown of nodeID: its partitions get other leaders from their
// ISRs, it leaves the ISRs that have other members, and it is fenced so that it is not elected
// while it stops. When nodeID is this node, its heartbeats stop first (a heartbeat would unfence
// it); the next start registers and heartbeats again.
func (c *Coordinator) ShutdownBroker(ctx context.Context, nodeID int32) error {
	if nodeID == c.config.NodeID {
		c.stopSession()
	}
	_, err := callController(c, ctx, opShutdownBroker, nodeID, c.shutdownBroker)
	return err
}

func (c *Coordinator) shutdownBroker(ctx context.Context, nodeID int32) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	_, err := c.propose(ctx, &fenceBrokerCommand{NodeID: nodeID, Controlled: true})
	return struct{}{}, err
}

// ElectPreferredLeaders makes each partition's preferred replica lead where it is live, in sync
// and not leading. Per named partition the result is nil (elected), ErrElectionNotNeeded,
// ErrPreferredLeaderNotAvailable or ErrUnknownTopic. With nil partitions every partition is tried
// and the map is empty.
func (c *Coordinator) ElectPreferredLeaders(ctx context.Context, partitions []TopicPartition) (map[TopicPartition]error, error) {
	results, err := callController(c, ctx, opElectPreferred, partitions, c.electPreferred)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]error, len(results))
	for _, r := range results {
		out[r.Partition] = nil
		if r.Error != nil {
			out[r.Partition] = r.Error.decode()
		}
	}
	return out, nil
}

type electionResult struct {
	Partition TopicPartition `json:"partition"`
	Error     *wireError     `json:"error,omitempty"`
}

func (c *Coordinator) electPreferred(ctx context.Context, partitions []TopicPartition) ([]electionResult, error) {
	if err := c.checkLeader(ctx); err != nil {
		return nil, err
	}
	result, err := c.propose(ctx, &electPreferredCommand{Partitions: partitions})
	if err != nil {
		return nil, err
	}
	out := make([]electionResult, 0, len(result.elections))
	for tp, e := range result.elections {
		r := electionResult{Partition: tp}
		if e != nil {
			r.Error = encodeWireError(e)
		}
		out = append(out, r)
	}
	return out, nil
}

// withoutFencedJoiners drops from a proposed ISR the brokers that are not in the current one and
// are fenced. A leader cannot tell a fenced follower that still fetches from a live one, and the
// state machine refuses a proposal that adds a fenced broker: refusing it whole would keep the live
// joiners out too (a leader alone in its ISR stayed below min.insync.replicas for a whole 14 s
// raft-cut fault in the chaos suite). A proposal that would add only fenced brokers is an error.
func withoutFencedJoiners(proposed, current []int32, live func(int32) bool) ([]int32, error) {
	kept := slices.DeleteFunc(slices.Clone(proposed), func(id int32) bool { return !slices.Contains(current, id) && !live(id) })
	if len(kept) < len(proposed) && sameMembers(kept, current) {
		return nil, fmt.Errorf("the brokers it would add are fenced")
	}
	return kept, nil
}

// sameMembers reports whether a and b hold the same ids, in any order (neither has duplicates).
func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}
