package coordinator

// resign-leader (24): a partition leader that cannot serve its own log (damaged data a follower
// needs) hands leadership to another live in-sync replica and leaves the ISR, so that it fetches
// the damaged range again from an intact copy before it counts as in sync. Kafka reaches the same
// end by taking a replica whose log directory fails offline.

import (
	"context"
	"fmt"
	"slices"
)

// ResignLeadership moves leadership of one partition off leaderID, which leads it at leaderEpoch,
// to the first other live member of its ISR, and takes leaderID out of the ISR. Stale epochs fail
// with ErrStalePartitionEpoch; a partition with no other live in-sync replica fails with
// ErrEligibleLeadersNotAvailable and keeps its leader (the only copy left in sync, damaged or not).
func (c *Coordinator) ResignLeadership(ctx context.Context, topic string, partition, leaderID, leaderEpoch int32) (Partition, error) {
	return callController(c, ctx, opResignLeader, resignLeaderArgs{Topic: topic, Partition: partition, LeaderID: leaderID, LeaderEpoch: leaderEpoch},
		c.resignLeader)
}

type resignLeaderArgs struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	LeaderID    int32  `json:"leaderID"`
	LeaderEpoch int32  `json:"leaderEpoch"`
}

func (c *Coordinator) resignLeader(ctx context.Context, args resignLeaderArgs) (Partition, error) {
	if err := c.checkLeader(ctx); err != nil {
		return Partition{}, err
	}
	topic, ok := c.Metadata().Topics[args.Topic]
	if !ok {
		return Partition{}, fmt.Errorf("%w: %q", ErrUnknownTopic, args.Topic)
	}
	result, err := c.propose(ctx, &resignLeaderCommand{
		topicReference: topicReference{Name: args.Topic, ID: topic.ID},
		Partition:      args.Partition, LeaderID: args.LeaderID, LeaderEpoch: args.LeaderEpoch,
	})
	return result.partition, err
}

// resignLeaderCommand moves leadership off a leader that asked, at the epoch it names.
type resignLeaderCommand struct {
	topicReference
	Partition   int32 `json:"partition"`
	LeaderID    int32 `json:"leaderID"`
	LeaderEpoch int32 `json:"leaderEpoch"`
}

func (*resignLeaderCommand) kind() commandType { return commandResignLeader }

func (c *resignLeaderCommand) apply(state *Metadata) (*Metadata, applyResult) {
	topic, p, err := c.resolvePartition(state, c.Partition)
	if err != nil {
		return nil, applyResult{err: err}
	}
	if p.Leader != c.LeaderID || p.LeaderEpoch != c.LeaderEpoch {
		return nil, applyResult{err: fmt.Errorf("%w: %s-%d is led by %d at epoch %d, the resignation names %d at %d",
			ErrStalePartitionEpoch, c.Name, c.Partition, p.Leader, p.LeaderEpoch, c.LeaderID, c.LeaderEpoch)}
	}
	next, err := resignPartition(p, c.LeaderID, liveIn(state))
	if err != nil {
		return nil, applyResult{err: fmt.Errorf("%s-%d: %w", c.Name, c.Partition, err)}
	}
	updated := topic.clone()
	updated.Partitions[c.Partition] = next
	return state.withTopic(c.Name, updated), applyResult{partition: next}
}

// resignPartition is p after its leader id resigns: the first other live ISR member (in replica
// order) leads at the next epoch, and id leaves the ISR. Pure policy, beside election.go's.
func resignPartition(p Partition, id int32, live func(int32) bool) (Partition, error) {
	others := func(member int32) bool { return member != id && live(member) }
	leader, _, _ := electLeader(p.Replicas, p.ISR, others, false)
	if leader < 0 {
		return p, fmt.Errorf("%w: no live in-sync replica other than %d (ISR %v)", ErrEligibleLeadersNotAvailable, id, p.ISR)
	}
	next := p
	next.Leader = leader
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(member int32) bool { return member == id })
	next.Replicas = slices.Clone(p.Replicas)
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, nil
}
