package coordinator

// Commands that move partition leadership and change ISRs: fence-broker (15), unfence-broker
// (16), alter-partition (17) and elect-preferred (18). Each applies the pure policy of election.go
// to every partition it concerns, as one Raft entry.

import (
	"fmt"
	"slices"
)

// liveIn reports liveness as state records it: registered and not fenced.
func liveIn(state *Metadata) func(int32) bool {
	return func(id int32) bool {
		broker, ok := state.Brokers[id]
		return ok && !broker.Fenced
	}
}

// uncleanAllowed reads a topic's unclean.leader.election.enable.
func uncleanAllowed(t *Topic) bool { return t.Configs[ConfigUncleanLeaderElection] == "true" }

// mapPartitions applies change to every partition of every topic and returns the new state, or
// nil when nothing changed. Topics are visited in name order, so the result is deterministic.
func mapPartitions(state *Metadata, change func(t *Topic, p Partition) (Partition, bool)) *Metadata {
	next := state
	for _, name := range state.TopicNames() {
		topic := state.Topics[name]
		var updated *Topic
		for i, p := range topic.Partitions {
			np, changed := change(topic, p)
			if !changed {
				continue
			}
			if updated == nil {
				updated = topic.clone()
			}
			updated.Partitions[i] = np
		}
		if updated != nil {
			next = next.withTopic(name, updated)
		}
	}
	if next == state {
		return nil
	}
	return next
}

// fenceBrokerCommand fences a broker that missed its session (or shut down, Controlled): it stops
// leading and leaves the ISRs that have another member.
type fenceBrokerCommand struct {
	NodeID     int32 `json:"nodeID"`
	Controlled bool  `json:"controlled,omitempty"`
}

func (*fenceBrokerCommand) kind() commandType { return commandFenceBroker }

func (c *fenceBrokerCommand) apply(state *Metadata) (*Metadata, applyResult) {
	broker, ok := state.Brokers[c.NodeID]
	if !ok {
		return nil, applyResult{err: fmt.Errorf("%w: node %d is not registered", ErrInvalidBroker, c.NodeID)}
	}
	next := state
	if !broker.Fenced {
		broker.Fenced = true
		next = state.withBroker(broker)
	}
	live := liveIn(next)
	moved := mapPartitions(next, func(t *Topic, p Partition) (Partition, bool) {
		np, changed, _ := fencePartition(p, c.NodeID, live, uncleanAllowed(t))
		return np, changed
	})
	if moved != nil {
		next = moved
	}
	if next == state {
		return nil, applyResult{}
	}
	return next, applyResult{}
}

// unfenceBrokerCommand lets a fenced broker that is back lead again: offline partitions whose ISR
// holds it (or, unclean, whose replicas do) elect it.
type unfenceBrokerCommand struct {
	NodeID int32 `json:"nodeID"`
}

func (*unfenceBrokerCommand) kind() commandType { return commandUnfenceBroker }

func (c *unfenceBrokerCommand) apply(state *Metadata) (*Metadata, applyResult) {
	broker, ok := state.Brokers[c.NodeID]
	if !ok {
		return nil, applyResult{err: fmt.Errorf("%w: node %d is not registered", ErrInvalidBroker, c.NodeID)}
	}
	next := state
	if broker.Fenced {
		broker.Fenced = false
		next = state.withBroker(broker)
	}
	live := liveIn(next)
	revived := mapPartitions(next, func(t *Topic, p Partition) (Partition, bool) {
		np, changed, _ := reviveOffline(p, live, uncleanAllowed(t))
		return np, changed
	})
	if revived != nil {
		next = revived
	}
	if next == state {
		return nil, applyResult{}
	}
	return next, applyResult{}
}

// alterPartitionCommand is a leader's ISR change, based on the epochs it names.
type alterPartitionCommand struct {
	topicReference
	Partition      int32   `json:"partition"`
	LeaderID       int32   `json:"leaderID"`
	LeaderEpoch    int32   `json:"leaderEpoch"`
	PartitionEpoch int32   `json:"partitionEpoch"`
	ISR            []int32 `json:"isr"`
}

func (*alterPartitionCommand) kind() commandType { return commandAlterPartition }

func (c *alterPartitionCommand) apply(state *Metadata) (*Metadata, applyResult) {
	topic, p, err := c.resolvePartition(state, c.Partition)
	if err != nil {
		return nil, applyResult{err: err}
	}
	if p.Leader != c.LeaderID || p.LeaderEpoch != c.LeaderEpoch || p.PartitionEpoch != c.PartitionEpoch {
		return nil, applyResult{err: fmt.Errorf("%w: %s-%d is led by %d at epochs %d/%d, the change names %d at %d/%d",
			ErrStalePartitionEpoch, c.Name, c.Partition, p.Leader, p.LeaderEpoch, p.PartitionEpoch, c.LeaderID, c.LeaderEpoch, c.PartitionEpoch)}
	}
	if err := validISR(c.ISR, p, liveIn(state)); err != nil {
		return nil, applyResult{err: fmt.Errorf("%w: %s-%d: %v", ErrInvalidISR, c.Name, c.Partition, err)}
	}
	updated := topic.clone()
	np := updated.Partitions[c.Partition]
	np.ISR = slices.Clone(c.ISR)
	np.PartitionEpoch++
	updated.Partitions[c.Partition] = np
	return state.withTopic(c.Name, updated), applyResult{partition: np}
}

// validISR checks a proposed ISR: the leader in it, replicas only, no duplicates, and no fenced
// broker joining.
func validISR(isr []int32, p Partition, live func(int32) bool) error {
	if !slices.Contains(isr, p.Leader) {
		return fmt.Errorf("ISR %v lacks the leader %d", isr, p.Leader)
	}
	for i, id := range isr {
		if !slices.Contains(p.Replicas, id) {
			return fmt.Errorf("node %d is not a replica %v", id, p.Replicas)
		}
		if slices.Contains(isr[:i], id) {
			return fmt.Errorf("node %d listed twice", id)
		}
		if !slices.Contains(p.ISR, id) && !live(id) {
			return fmt.Errorf("node %d is fenced and cannot join", id)
		}
	}
	return nil
}

// electPreferredCommand makes each named partition's preferred replica lead where it can (all
// partitions when Partitions is nil).
type electPreferredCommand struct {
	Partitions []TopicPartition `json:"partitions,omitempty"`
}

func (*electPreferredCommand) kind() commandType { return commandElectPreferred }

func (c *electPreferredCommand) apply(state *Metadata) (*Metadata, applyResult) {
	results := map[TopicPartition]error{}
	var wanted map[TopicPartition]bool
	if c.Partitions != nil {
		wanted = map[TopicPartition]bool{}
		for _, tp := range c.Partitions {
			wanted[tp] = true
			if t, ok := state.Topics[tp.Topic]; !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
				results[tp] = fmt.Errorf("%w: %s-%d", ErrUnknownTopic, tp.Topic, tp.Partition)
			}
		}
	}
	live := liveIn(state)
	next := mapPartitions(state, func(t *Topic, p Partition) (Partition, bool) {
		tp := TopicPartition{Topic: t.Name, Partition: p.Index}
		if wanted != nil && !wanted[tp] {
			return p, false
		}
		np, err := preferPreferred(p, live)
		if wanted != nil {
			results[tp] = err
		}
		return np, err == nil
	})
	return next, applyResult{elections: results}
}
