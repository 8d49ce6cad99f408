package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// commandType is the first byte of every Raft log entry the Coordinator
// writes. Numbers are part of the on-disk format: never reuse or renumber
// one; add new commands at the end.
type commandType uint8

const (
	commandNoop              commandType = 1
	commandInitCluster       commandType = 2
	commandRegisterBroker    commandType = 3
	commandCreateTopic       commandType = 4
	commandDeleteTopic       commandType = 5
	commandCreatePartitions  commandType = 6
	commandAlterTopicConfigs commandType = 7
	// Consumer offsets (offset_commands.go).
	commandCommitOffsets          commandType = 8
	commandDeleteGroupOffsets     commandType = 9
	commandDeletePartitionOffsets commandType = 10
	// Producer ids (producer_ids.go).
	commandAllocateProducerIDs commandType = 11
	// delete-topic-and-offsets (12) is delete-topic that also drops the topic's committed offsets;
	// delete-topic (5) keeps its original meaning for logs written before it existed.
	commandDeleteTopicAndOffsets commandType = 12
	// Group state of KIP-848 consumer groups and share groups (group_state_commands.go).
	commandWriteGroupState   commandType = 13
	commandAlterGroupConfigs commandType = 14
	// Leadership (leadership_commands.go).
	commandFenceBroker    commandType = 15
	commandUnfenceBroker  commandType = 16
	commandAlterPartition commandType = 17
	commandElectPreferred commandType = 18
	// Transaction coordinator state (transactions.go).
	commandWriteTransactions commandType = 19
	// Leaders their followers cannot reach (unreachable_leader.go).
	commandDemoteUnreachable commandType = 23
	// Security: ACLs and SCRAM credentials (security_commands.go).
	commandCreateACLs            commandType = 20
	commandDeleteACLs            commandType = 21
	commandAlterScramCredentials commandType = 22
	// A leader with a damaged log hands leadership off (leadership_resign.go).
	commandResignLeader commandType = 24
)

func (t commandType) String() string {
	switch t {
	case commandNoop:
		return "noop"
	case commandInitCluster:
		return "init-cluster"
	case commandRegisterBroker:
		return "register-broker"
	case commandCreateTopic:
		return "create-topic"
	case commandDeleteTopic:
		return "delete-topic"
	case commandCreatePartitions:
		return "create-partitions"
	case commandAlterTopicConfigs:
		return "alter-topic-configs"
	case commandCommitOffsets:
		return "commit-offsets"
	case commandDeleteGroupOffsets:
		return "delete-group-offsets"
	case commandDeletePartitionOffsets:
		return "delete-partition-offsets"
	case commandAllocateProducerIDs:
		return "allocate-producer-ids"
	case commandDeleteTopicAndOffsets:
		return "delete-topic-and-offsets"
	case commandWriteGroupState:
		return "write-group-state"
	case commandAlterGroupConfigs:
		return "alter-group-configs"
	case commandFenceBroker:
		return "fence-broker"
	case commandUnfenceBroker:
		return "unfence-broker"
	case commandAlterPartition:
		return "alter-partition"
	case commandElectPreferred:
		return "elect-preferred"
	case commandWriteTransactions:
		return "write-transactions"
	case commandDemoteUnreachable:
		return "demote-unreachable"
	case commandCreateACLs:
		return "create-acls"
	case commandDeleteACLs:
		return "delete-acls"
	case commandAlterScramCredentials:
		return "alter-scram-credentials"
	case commandResignLeader:
		return "resign-leader"
	default:
		return fmt.Sprintf("command-%d", uint8(t))
	}
}

// errUnknownCommand marks a log entry whose type byte this version does not
// know. Applying past it would let this node's state diverge from nodes that
// do know it, so the FSM refuses to continue.
var errUnknownCommand = errors.New("coordinator: unknown command type")

// errMalformedCommand marks a log entry of a known type whose body does not
// decode or breaks the command's invariants. Every node rejects the same
// bytes the same way, so the FSM answers with this error and changes
// nothing.
var errMalformedCommand = errors.New("coordinator: malformed command")

// command is one change to the replicated metadata.
//
// apply must be deterministic: its outcome depends only on the state and
// the command (no clock, no randomness, no map iteration order leaking into
// the result), because every node applies the same log. Anything random,
// such as topic ids and placement, is decided by the proposer and carried in
// the command. apply returns nil for next when the command changes nothing.
type command interface {
	kind() commandType
	apply(state *Metadata) (next *Metadata, result applyResult)
}

// applyResult is what the FSM hands back to the proposer through the Raft
// future.
type applyResult struct {
	topic       *Topic
	partition   Partition
	elections   map[TopicPartition]error
	producerIDs ProducerIDBlock
	// transactions is write-transactions' answer.
	transactions TransactionWriteResult
	// security is a security command's answer (security_commands.go).
	security securityResult
	err      error
}

// encodeCommand lays out a command as
//
//	+--------+------------------------------------------+
//	| offset | field                                    |
//	+--------+------------------------------------------+
//	| 0      | command type (uint8)                     |
//	| 1..n   | JSON body of that type, n = entry length |
//	+--------+------------------------------------------+
func encodeCommand(c command) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("coordinator: encode %s command: %w", c.kind(), err)
	}
	entry := make([]byte, 0, 1+len(body))
	entry = append(entry, byte(c.kind()))
	return append(entry, body...), nil
}

// decodeCommand parses an entry written by encodeCommand. It never panics.
// Errors wrap errUnknownCommand or errMalformedCommand.
func decodeCommand(entry []byte) (command, error) {
	if len(entry) == 0 {
		return nil, fmt.Errorf("%w: empty entry", errMalformedCommand)
	}
	var c command
	switch commandType(entry[0]) {
	case commandNoop:
		c = &noopCommand{}
	case commandInitCluster:
		c = &initClusterCommand{}
	case commandRegisterBroker:
		c = &registerBrokerCommand{}
	case commandCreateTopic:
		c = &createTopicCommand{}
	case commandDeleteTopic:
		c = &deleteTopicCommand{}
	case commandCreatePartitions:
		c = &createPartitionsCommand{}
	case commandAlterTopicConfigs:
		c = &alterTopicConfigsCommand{}
	case commandCommitOffsets:
		c = &commitOffsetsCommand{}
	case commandDeleteGroupOffsets:
		c = &deleteGroupOffsetsCommand{}
	case commandDeletePartitionOffsets:
		c = &deletePartitionOffsetsCommand{}
	case commandAllocateProducerIDs:
		c = &allocateProducerIDsCommand{}
	case commandDeleteTopicAndOffsets:
		c = &deleteTopicAndOffsetsCommand{}
	case commandWriteGroupState:
		c = &writeGroupStateCommand{}
	case commandAlterGroupConfigs:
		c = &alterGroupConfigsCommand{}
	case commandFenceBroker:
		c = &fenceBrokerCommand{}
	case commandUnfenceBroker:
		c = &unfenceBrokerCommand{}
	case commandAlterPartition:
		c = &alterPartitionCommand{}
	case commandElectPreferred:
		c = &electPreferredCommand{}
	case commandWriteTransactions:
		c = &writeTransactionsCommand{}
	case commandDemoteUnreachable:
		c = &demoteUnreachableCommand{}
	case commandCreateACLs:
		c = &createACLsCommand{}
	case commandDeleteACLs:
		c = &deleteACLsCommand{}
	case commandAlterScramCredentials:
		c = &alterScramCredentialsCommand{}
	case commandResignLeader:
		c = &resignLeaderCommand{}
	default:
		return nil, fmt.Errorf("%w: %d", errUnknownCommand, entry[0])
	}
	if err := json.Unmarshal(entry[1:], c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errMalformedCommand, commandType(entry[0]), err)
	}
	return c, nil
}

// noopCommand changes nothing; it measures the cost of a round through Raft.
type noopCommand struct{}

func (*noopCommand) kind() commandType { return commandNoop }

func (*noopCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

// initClusterCommand sets the cluster id. The first one applied wins; later
// ones (from a leader that raced another) change nothing.
type initClusterCommand struct {
	ClusterID string `json:"clusterID"`
}

func (*initClusterCommand) kind() commandType { return commandInitCluster }

func (c *initClusterCommand) apply(state *Metadata) (*Metadata, applyResult) {
	if state.ClusterID != "" || c.ClusterID == "" {
		return nil, applyResult{}
	}
	next := *state
	next.ClusterID = c.ClusterID
	return &next, applyResult{}
}

// registerBrokerCommand adds or replaces a broker's registration.
type registerBrokerCommand struct {
	Broker Broker `json:"broker"`
}

func (*registerBrokerCommand) kind() commandType { return commandRegisterBroker }

func (c *registerBrokerCommand) apply(state *Metadata) (*Metadata, applyResult) {
	broker := c.Broker
	existing, found := state.Brokers[broker.NodeID]
	// A re-registration keeps the fence: only unfence-broker lifts it, electing leaders too.
	broker.Fenced = found && existing.Fenced
	if found && existing == broker {
		return nil, applyResult{}
	}
	next := state.withBroker(broker)
	if found && existing.Incarnation != broker.Incarnation {
		// A restarted process: fence it (moving its leaderships at new epochs) until it heartbeats.
		if fenced, result := (&fenceBrokerCommand{NodeID: broker.NodeID}).apply(next); result.err != nil {
			return nil, result
		} else if fenced != nil {
			next = fenced
		}
	}
	return next, applyResult{}
}

// createTopicCommand creates a fully placed topic.
type createTopicCommand struct {
	Topic *Topic `json:"topic"`
}

func (*createTopicCommand) kind() commandType { return commandCreateTopic }

func (c *createTopicCommand) apply(state *Metadata) (*Metadata, applyResult) {
	topic := c.Topic
	if topic == nil || topic.Name == "" || len(topic.Partitions) == 0 || !wellFormedPartitions(0, topic.Partitions) {
		return nil, applyResult{err: fmt.Errorf("%w: create-topic without a name or with ill-formed partitions", errMalformedCommand)}
	}
	if _, exists := state.Topics[topic.Name]; exists {
		return nil, applyResult{err: fmt.Errorf("%w: %q", ErrTopicExists, topic.Name)}
	}
	return state.withTopic(topic.Name, topic), applyResult{topic: topic}
}

// wellFormedPartitions reports whether partitions are numbered first,
// first+1, ... and each has at least one replica: what Topic's invariant
// Partitions[i].Index == i needs from a command.
func wellFormedPartitions(first int32, partitions []Partition) bool {
	for i, partition := range partitions {
		if partition.Index != first+int32(i) || len(partition.Replicas) == 0 {
			return false
		}
	}
	return true
}

// topicReference names a topic by name and id, so that a change proposed
// against one incarnation of a topic never lands on a topic re-created under
// the same name.
type topicReference struct {
	Name string   `json:"name"`
	ID   [16]byte `json:"id"`
}

func (r topicReference) resolve(state *Metadata) (*Topic, error) {
	topic, found := state.Topics[r.Name]
	if !found || topic.ID != r.ID {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Name)
	}
	return topic, nil
}

// resolvePartition is resolve plus the topic's partition index, which must exist.
func (r topicReference) resolvePartition(state *Metadata, index int32) (*Topic, Partition, error) {
	topic, err := r.resolve(state)
	if err != nil {
		return nil, Partition{}, err
	}
	if index < 0 || int(index) >= len(topic.Partitions) {
		return nil, Partition{}, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, r.Name, index)
	}
	return topic, topic.Partitions[index], nil
}

// deleteTopicCommand deletes a topic.
type deleteTopicCommand struct {
	topicReference
}

func (*deleteTopicCommand) kind() commandType { return commandDeleteTopic }

func (c *deleteTopicCommand) apply(state *Metadata) (*Metadata, applyResult) {
	if _, err := c.resolve(state); err != nil {
		return nil, applyResult{err: err}
	}
	return state.withTopic(c.Name, nil), applyResult{}
}

// deleteTopicAndOffsetsCommand deletes a topic and, in the FSM, every group's committed offsets of
// it, as Kafka does: a topic re-created under the name must not start its groups at offsets of the
// old one.
type deleteTopicAndOffsetsCommand struct {
	deleteTopicCommand
}

func (*deleteTopicAndOffsetsCommand) kind() commandType { return commandDeleteTopicAndOffsets }

// createPartitionsCommand appends placed partitions to a topic. The first
// new partition's index must equal the topic's partition count when the
// command applies; otherwise another change got there first.
type createPartitionsCommand struct {
	topicReference
	Partitions []Partition `json:"partitions"`
}

func (*createPartitionsCommand) kind() commandType { return commandCreatePartitions }

func (c *createPartitionsCommand) apply(state *Metadata) (*Metadata, applyResult) {
	topic, err := c.resolve(state)
	if err != nil {
		return nil, applyResult{err: err}
	}
	if len(c.Partitions) == 0 || !wellFormedPartitions(c.Partitions[0].Index, c.Partitions) {
		return nil, applyResult{err: fmt.Errorf("%w: create-partitions with ill-formed partitions", errMalformedCommand)}
	}
	if c.Partitions[0].Index != int32(len(topic.Partitions)) {
		return nil, applyResult{err: fmt.Errorf("%w: topic %q has %d partitions, the change was proposed for another count",
			ErrInvalidPartitions, c.Name, len(topic.Partitions))}
	}
	next := topic.clone()
	next.Partitions = append(next.Partitions, c.Partitions...)
	return state.withTopic(c.Name, next), applyResult{topic: next}
}

// alterTopicConfigsCommand changes a topic's config overrides. With
// ReplaceAll the overrides become exactly Set; otherwise Set entries are
// written and Remove keys deleted. Values were validated by the proposer:
// validation rules may change between versions, application may not.
type alterTopicConfigsCommand struct {
	topicReference
	Set        map[string]string `json:"set,omitempty"`
	Remove     []string          `json:"remove,omitempty"`
	ReplaceAll bool              `json:"replaceAll,omitempty"`
}

func (*alterTopicConfigsCommand) kind() commandType { return commandAlterTopicConfigs }

func (c *alterTopicConfigsCommand) apply(state *Metadata) (*Metadata, applyResult) {
	topic, err := c.resolve(state)
	if err != nil {
		return nil, applyResult{err: err}
	}
	configs := alteredConfigs(topic.Configs, c.Set, c.Remove, c.ReplaceAll)
	if maps.Equal(configs, topic.Configs) {
		return nil, applyResult{topic: topic}
	}
	next := *topic // Partitions are shared, unchanged.
	next.Configs = configs
	return state.withTopic(c.Name, &next), applyResult{topic: &next}
}

// alteredConfigs returns a new override map; current is not modified. An
// empty result is nil so that "no overrides" has one representation.
func alteredConfigs(current, set map[string]string, remove []string, replaceAll bool) map[string]string {
	var configs map[string]string
	if replaceAll {
		configs = maps.Clone(set)
	} else {
		configs = maps.Clone(current)
		if configs == nil {
			configs = map[string]string{}
		}
		maps.Copy(configs, set)
		for key := range slices.Values(remove) {
			delete(configs, key)
		}
	}
	if len(configs) == 0 {
		return nil
	}
	return configs
}
