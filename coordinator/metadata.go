package coordinator

import (
	"maps"
	"slices"
)

// Broker is a registered broker: where clients reach it.
type Broker struct {
	NodeID int32  `json:"nodeID"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
	// Endpoints are the broker's advertised address on each of its named listeners, written
	// "NAME://host:port,..." (Host and Port are the inter-broker listener's). Empty for brokers
	// registered before listeners had names: Host and Port serve every listener then.
	Endpoints string `json:"endpoints,omitempty"`
	// Fenced brokers missed their session (or shut down): they lead nothing and are in no ISR
	// that has another member, and Metadata answers leave them out.
	Fenced bool `json:"fenced,omitempty"`
	// Incarnation identifies one run of the broker's process (a random value chosen at start).
	// A registration with a new incarnation means the process restarted, perhaps with less of its
	// log than it had (a torn or lost tail): it is fenced as it registers, so that it never leads
	// again at an epoch it led before, and unfenced by its next heartbeat.
	Incarnation string `json:"incarnation,omitempty"`
}

// Partition is one partition's placement.
type Partition struct {
	Index int32 `json:"index"`
	// Leader is the broker serving the partition, or -1 while none of the
	// ISR is live (offline). Invariant: Leader is -1 or in ISR, and ISR is a
	// non-empty subset of Replicas.
	Leader int32 `json:"leader"`
	// LeaderEpoch starts at 0 and grows by one with every leader change.
	LeaderEpoch int32 `json:"leaderEpoch"`
	// PartitionEpoch grows by one with every change of leader or ISR; a leader's ISR change
	// names the one it was based on. Invariant: it never decreases.
	PartitionEpoch int32 `json:"partitionEpoch,omitempty"`
	// Replicas lists the brokers holding a copy, preferred leader first.
	Replicas []int32 `json:"replicas"`
	// ISR is the in-sync replica set; it equals Replicas at creation.
	ISR []int32 `json:"isr"`
}

// Topic is a topic's metadata.
type Topic struct {
	Name string `json:"name"`
	// ID is the Kafka topic id, a random version 4 UUID; never all zeros
	// for a created topic.
	ID [16]byte `json:"id"`
	// Partitions is indexed by partition number. Invariant:
	// Partitions[i].Index == i.
	Partitions []Partition `json:"partitions"`
	// Configs holds the topic's config overrides only; keys absent here take
	// the broker's defaults (see TopicConfigDefaults).
	Configs  map[string]string `json:"configs,omitempty"`
	Internal bool              `json:"internal,omitempty"`
}

// ReplicationFactor is the length of the first partition's replica list, or
// 0 for a topic without partitions.
func (t *Topic) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// Metadata is an immutable snapshot of the cluster metadata. Every applied
// change produces a new Metadata that shares unchanged parts (Broker values,
// *Topic pointers) with its predecessor, so neither the snapshot nor
// anything reachable from it may be modified: readers never lock.
type Metadata struct {
	// Version is the Raft log index of the last change to the replicated
	// state (0 for an empty state). ControllerID is not replicated state:
	// two snapshots with equal Version may differ in ControllerID.
	Version uint64
	// ControllerID is the node id of the Raft leader, or -1 while no leader
	// is known or the new leader has not yet caught up with the log.
	ControllerID int32
	// ClusterID is generated once, by the first leader, and never changes.
	ClusterID string
	Brokers   map[int32]Broker
	Topics    map[string]*Topic
	// LiveSince is the Raft index of the last change to the set of live (registered, unfenced)
	// brokers, which decides each group's coordinator; 0 when not known (a snapshot older than
	// format 8). A commit accepted under another live set is dropped (OffsetCommit.LiveSince).
	LiveSince uint64
}

// BrokerIDs returns the registered broker ids in ascending order.
func (m *Metadata) BrokerIDs() []int32 {
	return slices.Sorted(maps.Keys(m.Brokers))
}

// LiveBrokerIDs returns the registered brokers that are not fenced, ascending.
func (m *Metadata) LiveBrokerIDs() []int32 {
	var ids []int32
	for _, id := range m.BrokerIDs() {
		if !m.Brokers[id].Fenced {
			ids = append(ids, id)
		}
	}
	return ids
}

// TopicNames returns the topic names in ascending order.
func (m *Metadata) TopicNames() []string {
	return slices.Sorted(maps.Keys(m.Topics))
}

// emptyMetadata is the state of a cluster before its first change.
func emptyMetadata() *Metadata {
	return &Metadata{
		ControllerID: -1,
		Brokers:      map[int32]Broker{},
		Topics:       map[string]*Topic{},
	}
}

// withTopic returns a copy of m in which name maps to topic, or in which
// name is absent when topic is nil. m itself is not modified.
func (m *Metadata) withTopic(name string, topic *Topic) *Metadata {
	next := *m
	next.Topics = maps.Clone(m.Topics)
	if next.Topics == nil {
		next.Topics = map[string]*Topic{}
	}
	if topic == nil {
		delete(next.Topics, name)
	} else {
		next.Topics[name] = topic
	}
	return &next
}

// withBroker returns a copy of m in which broker is registered.
func (m *Metadata) withBroker(broker Broker) *Metadata {
	next := *m
	next.Brokers = maps.Clone(m.Brokers)
	if next.Brokers == nil {
		next.Brokers = map[int32]Broker{}
	}
	next.Brokers[broker.NodeID] = broker
	return &next
}

// clone returns a deep copy of t, for building a changed version of it.
func (t *Topic) clone() *Topic {
	next := *t
	next.Partitions = make([]Partition, len(t.Partitions))
	for i, partition := range t.Partitions {
		partition.Replicas = slices.Clone(partition.Replicas)
		partition.ISR = slices.Clone(partition.ISR)
		next.Partitions[i] = partition
	}
	next.Configs = maps.Clone(t.Configs)
	return &next
}
