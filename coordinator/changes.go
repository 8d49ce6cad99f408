package coordinator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	mathrand "math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Every change follows the same path: on any node, the public method hands
// its arguments to callController, which runs the local method on the
// controller (directly, or forwarded). The local method checks leadership,
// validates against the controller's caught-up snapshot (which is all
// validateOnly does), builds a fully decided command (ids and placement
// included), and proposes it. The FSM re-checks what another change could
// have invalidated in between (a topic created twice, partitions added
// twice), so concurrent calls are safe.

// RegisterBroker records or replaces a broker's registration. Re-registering
// an identical broker changes nothing.
func (c *Coordinator) RegisterBroker(ctx context.Context, broker Broker) error {
	_, err := callController(c, ctx, opRegisterBroker, broker, c.registerBroker)
	return err
}

func (c *Coordinator) registerBroker(ctx context.Context, broker Broker) (struct{}, error) {
	if broker.NodeID < 0 || broker.Host == "" || broker.Port < 1 || broker.Port > 65535 {
		return struct{}{}, fmt.Errorf("%w: node %d at %q port %d", ErrInvalidBroker, broker.NodeID, broker.Host, broker.Port)
	}
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	_, err := c.propose(ctx, &registerBrokerCommand{Broker: broker})
	return struct{}{}, err
}

// CreateTopic creates a topic with partitions partitions of
// replicationFactor replicas each, spread over the registered brokers by
// AssignReplicas from a random start. configs are overrides validated by
// ValidateTopicConfigs. With validateOnly it returns the topic it would
// create (zero ID) and changes nothing. replicationFactor -1 ("broker
// default") must be resolved by the caller.
func (c *Coordinator) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16,
	configs map[string]string, validateOnly bool) (*Topic, error) {
	return callController(c, ctx, opCreateTopic, createTopicArgs{
		Name: name, Partitions: partitions, ReplicationFactor: replicationFactor, Configs: configs, ValidateOnly: validateOnly,
	}, c.createTopic)
}

// CreateTopicWithAssignments creates a topic whose partition i is placed on
// assignments[i] (the first live replica leads), checked by
// CheckManualAssignment against the registered brokers. configs and
// validateOnly are as for CreateTopic.
func (c *Coordinator) CreateTopicWithAssignments(ctx context.Context, name string, assignments [][]int32,
	configs map[string]string, validateOnly bool) (*Topic, error) {
	replicationFactor := int16(0)
	if len(assignments) > 0 {
		replicationFactor = int16(len(assignments[0]))
	}
	return callController(c, ctx, opCreateTopic, createTopicArgs{
		Name: name, Partitions: int32(len(assignments)), ReplicationFactor: replicationFactor, Assignments: assignments,
		Configs: configs, ValidateOnly: validateOnly,
	}, c.createTopic)
}

type createTopicArgs struct {
	Name string `json:"name"`
	// Assignments, when set, places the partitions by hand (Partitions is its length).
	Assignments       [][]int32         `json:"assignments,omitempty"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replicationFactor"`
	Configs           map[string]string `json:"configs,omitempty"`
	ValidateOnly      bool              `json:"validateOnly,omitempty"`
}

func (c *Coordinator) createTopic(ctx context.Context, args createTopicArgs) (*Topic, error) {
	name, partitions, replicationFactor, configs, validateOnly := args.Name, args.Partitions, args.ReplicationFactor, args.Configs, args.ValidateOnly
	if err := c.checkLeader(ctx); err != nil {
		return nil, err
	}
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if IsInternalTopicName(name) {
		return nil, fmt.Errorf("%w: creation of internal topic %q is prohibited", ErrReservedTopic, name)
	}
	if partitions <= 0 {
		return nil, fmt.Errorf("%w: %d partitions; the count must be positive", ErrInvalidPartitions, partitions)
	}
	if replicationFactor <= 0 && len(args.Assignments) == 0 {
		return nil, fmt.Errorf("%w: %d; it must be positive", ErrInvalidReplicationFactor, replicationFactor)
	}
	if err := ValidateTopicConfigs(configs); err != nil {
		return nil, err
	}
	metadata := c.Metadata()
	if _, exists := metadata.Topics[name]; exists {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	brokerIDs := metadata.LiveBrokerIDs()
	var placed []Partition
	if len(args.Assignments) > 0 {
		if err := CheckManualAssignment(args.Assignments, metadata.BrokerIDs(), 0, 0); err != nil {
			return nil, err
		}
		var err error
		if placed, err = manualPartitions(0, args.Assignments, brokerIDs); err != nil {
			return nil, err
		}
	} else {
		if int(replicationFactor) > len(brokerIDs) {
			return nil, fmt.Errorf("%w: %d is larger than the %d registered brokers",
				ErrInvalidReplicationFactor, replicationFactor, len(brokerIDs))
		}
		assignments, err := AssignReplicas(brokerIDs, 0, partitions, int(replicationFactor), mathrand.IntN(len(brokerIDs)))
		if err != nil {
			return nil, err
		}
		placed = newPartitions(0, assignments)
	}
	topic := &Topic{Name: name, Partitions: placed}
	if len(configs) > 0 {
		topic.Configs = maps.Clone(configs)
	}
	if validateOnly {
		return topic, nil
	}
	topic.ID = newTopicID()
	result, err := c.propose(ctx, &createTopicCommand{Topic: topic})
	if err != nil {
		return nil, err
	}
	return result.topic, nil
}

// DeleteTopic deletes a topic. Internal topics cannot be deleted.
func (c *Coordinator) DeleteTopic(ctx context.Context, name string) error {
	_, err := callController(c, ctx, opDeleteTopic, name, c.deleteTopic)
	return err
}

func (c *Coordinator) deleteTopic(ctx context.Context, name string) (struct{}, error) {
	topic, err := c.userTopic(ctx, name)
	if err != nil {
		return struct{}{}, err
	}
	_, err = c.propose(ctx, &deleteTopicAndOffsetsCommand{deleteTopicCommand{topicReference{Name: name, ID: topic.ID}}})
	return struct{}{}, err
}

// CreatePartitions grows a topic to totalCount partitions, placing the new
// ones so that leaders continue the topic's round-robin. Shrinking or
// keeping the count is ErrInvalidPartitions.
func (c *Coordinator) CreatePartitions(ctx context.Context, name string, totalCount int32, validateOnly bool) error {
	_, err := callController(c, ctx, opCreatePartitions, createPartitionsArgs{
		Name: name, TotalCount: totalCount, ValidateOnly: validateOnly,
	}, c.createPartitions)
	return err
}

// CreatePartitionsWithAssignments grows a topic to totalCount partitions,
// placing new partition current+i on assignments[i]: there must be one list
// per new partition, each with the topic's replication factor, checked by
// CheckManualAssignment (ErrInvalidReplicaAssignment otherwise).
func (c *Coordinator) CreatePartitionsWithAssignments(ctx context.Context, name string, totalCount int32,
	assignments [][]int32, validateOnly bool) error {
	_, err := callController(c, ctx, opCreatePartitions, createPartitionsArgs{
		Name: name, TotalCount: totalCount, Manual: true, Assignments: assignments, ValidateOnly: validateOnly,
	}, c.createPartitions)
	return err
}

type createPartitionsArgs struct {
	Name       string `json:"name"`
	TotalCount int32  `json:"totalCount"`
	// Manual places the new partitions by hand, on Assignments.
	Manual       bool      `json:"manual,omitempty"`
	Assignments  [][]int32 `json:"assignments,omitempty"`
	ValidateOnly bool      `json:"validateOnly,omitempty"`
}

func (c *Coordinator) createPartitions(ctx context.Context, args createPartitionsArgs) (struct{}, error) {
	name, totalCount := args.Name, args.TotalCount
	topic, err := c.userTopic(ctx, name)
	if err != nil {
		return struct{}{}, err
	}
	current := int32(len(topic.Partitions))
	if totalCount <= current {
		return struct{}{}, fmt.Errorf("%w: topic %q has %d partitions, the new count %d must be larger",
			ErrInvalidPartitions, name, current, totalCount)
	}
	metadata := c.Metadata()
	brokerIDs := metadata.LiveBrokerIDs()
	replicationFactor := topic.ReplicationFactor()
	if args.Manual {
		if added := totalCount - current; int(added) != len(args.Assignments) {
			return struct{}{}, fmt.Errorf("%w: increasing the partitions of %q by %d, but %d assignments given",
				ErrInvalidReplicaAssignment, name, added, len(args.Assignments))
		}
		if err := CheckManualAssignment(args.Assignments, metadata.BrokerIDs(), current, replicationFactor); err != nil {
			return struct{}{}, err
		}
		placed, err := manualPartitions(current, args.Assignments, brokerIDs)
		if err != nil || args.ValidateOnly {
			return struct{}{}, err
		}
		_, err = c.propose(ctx, &createPartitionsCommand{topicReference: topicReference{Name: name, ID: topic.ID}, Partitions: placed})
		return struct{}{}, err
	}
	if replicationFactor > len(brokerIDs) {
		return struct{}{}, fmt.Errorf("%w: topic %q has %d replicas per partition but %d brokers are registered",
			ErrInvalidReplicationFactor, name, replicationFactor, len(brokerIDs))
	}
	// Continue the rotation: the start index is the position of partition
	// 0's preferred leader, so partition p leads on brokerIDs[start+p].
	start := 0
	if len(topic.Partitions) > 0 && len(topic.Partitions[0].Replicas) > 0 {
		if position := slices.Index(brokerIDs, topic.Partitions[0].Replicas[0]); position >= 0 {
			start = position
		}
	}
	assignments, err := AssignReplicas(brokerIDs, current, totalCount-current, replicationFactor, start)
	if err != nil {
		return struct{}{}, err
	}
	if args.ValidateOnly {
		return struct{}{}, nil
	}
	_, err = c.propose(ctx, &createPartitionsCommand{
		topicReference: topicReference{Name: name, ID: topic.ID},
		Partitions:     newPartitions(current, assignments),
	})
	return struct{}{}, err
}

// AlterTopicConfigs changes a topic's config overrides. With replaceAll
// (Kafka's AlterConfigs) the overrides become exactly set and remove must be
// empty; otherwise (IncrementalAlterConfigs) set entries are written and
// remove keys revert to their defaults. Every key must be a served config
// key and every value valid; a key may not be both set and removed. With
// validateOnly nothing changes.
func (c *Coordinator) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, remove []string,
	replaceAll bool, validateOnly bool) error {
	_, err := callController(c, ctx, opAlterTopicConfigs, alterTopicConfigsArgs{
		Name: name, Set: set, Remove: remove, ReplaceAll: replaceAll, ValidateOnly: validateOnly,
	}, c.alterTopicConfigs)
	return err
}

type alterTopicConfigsArgs struct {
	Name         string            `json:"name"`
	Set          map[string]string `json:"set,omitempty"`
	Remove       []string          `json:"remove,omitempty"`
	ReplaceAll   bool              `json:"replaceAll,omitempty"`
	ValidateOnly bool              `json:"validateOnly,omitempty"`
}

func (c *Coordinator) alterTopicConfigs(ctx context.Context, args alterTopicConfigsArgs) (struct{}, error) {
	name, set, remove, replaceAll := args.Name, args.Set, args.Remove, args.ReplaceAll
	topic, err := c.userTopic(ctx, name)
	if err != nil {
		return struct{}{}, err
	}
	if err := ValidateTopicConfigs(set); err != nil {
		return struct{}{}, err
	}
	if replaceAll && len(remove) > 0 {
		return struct{}{}, fmt.Errorf("%w: remove %v together with replace-all", ErrInvalidConfig, remove)
	}
	for _, key := range remove {
		if !IsTopicConfigKey(key) {
			return struct{}{}, fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, key)
		}
		if _, alsoSet := set[key]; alsoSet {
			return struct{}{}, fmt.Errorf("%w: key %q is both set and removed", ErrInvalidConfig, key)
		}
	}
	if args.ValidateOnly {
		return struct{}{}, nil
	}
	_, err = c.propose(ctx, &alterTopicConfigsCommand{
		topicReference: topicReference{Name: name, ID: topic.ID},
		Set:            set,
		Remove:         remove,
		ReplaceAll:     replaceAll,
	})
	return struct{}{}, err
}

// userTopic checks leadership and finds a topic users may change.
func (c *Coordinator) userTopic(ctx context.Context, name string) (*Topic, error) {
	if err := c.checkLeader(ctx); err != nil {
		return nil, err
	}
	topic, found := c.Metadata().Topics[name]
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if topic.Internal {
		return nil, fmt.Errorf("%w: internal topic %q cannot be changed by clients", ErrReservedTopic, name)
	}
	return topic, nil
}

// checkLeader refuses work on a closed Coordinator, an ended ctx, or a node
// that is not the caught-up controller.
func (c *Coordinator) checkLeader(ctx context.Context) error {
	select {
	case <-c.stop:
		return ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	if !c.IsLeader() {
		return fmt.Errorf("%w: the controller is node %d", ErrNotLeader, c.Metadata().ControllerID)
	}
	return nil
}

// propose hands a command to Raft and waits for the FSM's answer. ctx and
// Config.ApplyTimeout bound the wait to enqueue the entry; once enqueued,
// Raft resolves the future when the entry applies, leadership is lost or
// Raft shuts down, so the call waits for that.
func (c *Coordinator) propose(ctx context.Context, cmd command) (applyResult, error) {
	entry, err := encodeCommand(cmd)
	if err != nil {
		return applyResult{}, err
	}
	timeout := c.config.ApplyTimeout
	if deadline, ok := ctx.Deadline(); ok {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return applyResult{}, fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
		}
		timeout = min(timeout, remaining)
	}
	proposed := time.Now()
	future := c.raft.Apply(entry, timeout)
	if err := future.Error(); err != nil {
		return applyResult{}, fmt.Errorf("coordinator: apply %s: %w", cmd.kind(), mapRaftError(err))
	}
	c.metrics.applySeconds.UpdateDuration(proposed) // committed and applied
	result, ok := future.Response().(applyResult)
	if !ok {
		panic(fmt.Sprintf("coordinator: FSM answered %T, want applyResult", future.Response()))
	}
	return result, result.err
}

// mapRaftError translates hashicorp/raft's errors into this package's
// classes, keeping the original in the chain.
func mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	default:
		return err
	}
}

// newPartitions builds fresh partitions numbered from first: the preferred
// leader leads at epoch 0 and every replica is in sync.
func newPartitions(first int32, assignments [][]int32) []Partition {
	partitions := make([]Partition, len(assignments))
	for i, replicas := range assignments {
		partitions[i] = Partition{
			Index:       first + int32(i),
			Leader:      replicas[0],
			LeaderEpoch: 0,
			Replicas:    replicas,
			ISR:         slices.Clone(replicas),
		}
	}
	return partitions
}

// newTopicID returns a random version 4 UUID, which is never all zeros.
func newTopicID() [16]byte {
	var id [16]byte
	rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}
