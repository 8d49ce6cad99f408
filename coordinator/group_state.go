package coordinator

import (
	"cmp"
	"maps"
	"slices"
)

// Group state is the durable state of the groups that keep more than committed offsets: KIP-848
// consumer groups (their epochs, members and assignments) and KIP-932 share groups (their epoch
// and, per share partition, the start offset and the state of the in-flight records), plus
// group-level configs (share.auto.offset.reset and the like). Like offsets it is replicated state
// kept apart from Metadata: writes neither bump Metadata.Version nor wake subscribers. The broker
// batches writes (one write-group-state entry carries every group and share partition that changed
// while the previous entry was in Raft), so a Raft round is paid per batch, never per record.
//
// Group records are opaque to the coordinator: the broker's group packages encode them (Body) and
// version their own encoding; the coordinator only stores, replaces and deletes them.

// Group types, as Kafka names them.
const (
	GroupTypeConsumer = "consumer"
	GroupTypeShare    = "share"
)

// GroupRecord is one group's durable record.
type GroupRecord struct {
	// Type is GroupTypeConsumer or GroupTypeShare.
	Type string `json:"type"`
	// Body is the group's state in its package's own encoding.
	Body []byte `json:"body,omitempty"`
}

// ShareStateRange is a run of in-flight records with one persisted state and delivery count
// (share.StateRange's durable form: State 0 available, 2 acknowledged, 3 archived).
type ShareStateRange struct {
	First         int64 `json:"first"`
	Last          int64 `json:"last"`
	State         uint8 `json:"state"`
	DeliveryCount int16 `json:"deliveryCount"`
}

// SharePartitionState is a share group's durable state of one partition.
type SharePartitionState struct {
	// TopicID is the topic incarnation the state belongs to: a topic deleted and re-created under
	// its name does not inherit it.
	TopicID     [16]byte          `json:"topicID"`
	StartOffset int64             `json:"startOffset"`
	Ranges      []ShareStateRange `json:"ranges,omitempty"`
}

// SharePartitionWrite replaces (or, with State nil, deletes) one share partition's state.
type SharePartitionWrite struct {
	Group string `json:"group"`
	TopicPartition
	State *SharePartitionState `json:"state,omitempty"`
}

// GroupRecordWrite replaces (or, with Record nil, deletes) one group's record.
type GroupRecordWrite struct {
	Group  string       `json:"group"`
	Record *GroupRecord `json:"record,omitempty"`
}

// GroupStateWrite is one batch of group state changes: applied as one Raft entry, in the order
// DeleteGroups, Groups, SharePartitions.
type GroupStateWrite struct {
	// DeleteGroups drops everything of these groups: record, share partitions and configs.
	DeleteGroups    []string              `json:"deleteGroups,omitempty"`
	Groups          []GroupRecordWrite    `json:"groups,omitempty"`
	SharePartitions []SharePartitionWrite `json:"sharePartitions,omitempty"`
}

// Empty reports whether the write changes nothing.
func (w GroupStateWrite) Empty() bool {
	return len(w.DeleteGroups) == 0 && len(w.Groups) == 0 && len(w.SharePartitions) == 0
}

// GroupState is an immutable snapshot of every group's durable state. Maps reachable from it are
// shared between snapshots: never modify them.
type GroupState struct {
	// Index is the Raft index of the last applied group state change (0 before any).
	Index   uint64
	records map[string]GroupRecord
	shares  map[string]map[TopicPartition]SharePartitionState
	configs map[string]map[string]string
}

func emptyGroupState() *GroupState {
	return &GroupState{records: map[string]GroupRecord{}, shares: map[string]map[TopicPartition]SharePartitionState{},
		configs: map[string]map[string]string{}}
}

// Record returns a group's record.
func (s *GroupState) Record(group string) (GroupRecord, bool) {
	r, ok := s.records[group]
	return r, ok
}

// Groups returns the ids of groups with a record, share partitions or configs, sorted.
func (s *GroupState) Groups() []string {
	ids := slices.Collect(maps.Keys(s.records))
	ids = slices.AppendSeq(ids, maps.Keys(s.shares))
	ids = slices.AppendSeq(ids, maps.Keys(s.configs))
	slices.Sort(ids)
	return slices.Compact(ids)
}

// SharePartitions returns a share group's partition states (nil when none). Do not modify it.
func (s *GroupState) SharePartitions(group string) map[TopicPartition]SharePartitionState {
	return s.shares[group]
}

// SharePartition returns one share partition's state.
func (s *GroupState) SharePartition(group, topic string, partition int32) (SharePartitionState, bool) {
	state, ok := s.shares[group][TopicPartition{Topic: topic, Partition: partition}]
	return state, ok
}

// Configs returns a group's config overrides (nil when none). Do not modify it.
func (s *GroupState) Configs(group string) map[string]string { return s.configs[group] }

// withWrite returns a copy of s with w applied; only the groups touched are copied.
func (s *GroupState) withWrite(w GroupStateWrite) *GroupState {
	next := &GroupState{Index: s.Index, records: maps.Clone(s.records), shares: maps.Clone(s.shares), configs: maps.Clone(s.configs)}
	for _, group := range w.DeleteGroups {
		delete(next.records, group)
		delete(next.shares, group)
		delete(next.configs, group)
	}
	for _, g := range w.Groups {
		if g.Record == nil {
			delete(next.records, g.Group)
		} else {
			next.records[g.Group] = *g.Record
		}
	}
	copied := map[string]bool{}
	for _, sp := range w.SharePartitions {
		partitions := next.shares[sp.Group]
		if !copied[sp.Group] {
			partitions = maps.Clone(partitions)
			if partitions == nil {
				partitions = map[TopicPartition]SharePartitionState{}
			}
			next.shares[sp.Group] = partitions
			copied[sp.Group] = true
		}
		if sp.State == nil {
			delete(partitions, sp.TopicPartition)
		} else {
			partitions[sp.TopicPartition] = *sp.State
		}
	}
	for group := range copied {
		if len(next.shares[group]) == 0 {
			delete(next.shares, group)
		}
	}
	return next
}

// withConfigs returns a copy of s with one group's config overrides replaced (nil removes them).
func (s *GroupState) withConfigs(group string, configs map[string]string) *GroupState {
	next := &GroupState{Index: s.Index, records: s.records, shares: s.shares, configs: maps.Clone(s.configs)}
	if len(configs) == 0 {
		delete(next.configs, group)
	} else {
		next.configs[group] = configs
	}
	return next
}

// groupStateFile is the snapshot form of a GroupState, sorted so equal states give equal bytes.
type groupStateFile struct {
	Index           uint64                `json:"index,omitempty"`
	Records         []GroupRecordWrite    `json:"records,omitempty"`
	SharePartitions []SharePartitionWrite `json:"sharePartitions,omitempty"`
	Configs         []groupConfigsEntry   `json:"configs,omitempty"`
}

type groupConfigsEntry struct {
	Group   string            `json:"group"`
	Configs map[string]string `json:"configs"`
}

func (s *GroupState) file() groupStateFile {
	f := groupStateFile{Index: s.Index}
	for _, id := range slices.Sorted(maps.Keys(s.records)) {
		record := s.records[id]
		f.Records = append(f.Records, GroupRecordWrite{Group: id, Record: &record})
	}
	for _, id := range slices.Sorted(maps.Keys(s.shares)) {
		partitions := s.shares[id]
		keys := slices.SortedFunc(maps.Keys(partitions), func(a, b TopicPartition) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		for _, tp := range keys {
			state := partitions[tp]
			f.SharePartitions = append(f.SharePartitions, SharePartitionWrite{Group: id, TopicPartition: tp, State: &state})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.configs)) {
		f.Configs = append(f.Configs, groupConfigsEntry{Group: id, Configs: s.configs[id]})
	}
	return f
}

func (f groupStateFile) state() *GroupState {
	s := emptyGroupState().withWrite(GroupStateWrite{Groups: f.Records, SharePartitions: f.SharePartitions})
	s.Index = f.Index
	for _, c := range f.Configs {
		if len(c.Configs) > 0 {
			s.configs[c.Group] = c.Configs
		}
	}
	return s
}
