package coordinator

import (
	"cmp"
	"maps"
	"slices"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// CommittedOffset is a consumer group's committed position in one partition.
type CommittedOffset struct {
	// Offset is the next offset the group will consume.
	Offset int64 `json:"offset"`
	// LeaderEpoch is the leader epoch of the last consumed record, -1 when unknown.
	LeaderEpoch int32 `json:"leaderEpoch"`
	// Metadata is the client's free-form string.
	Metadata string `json:"metadata,omitempty"`
	// CommitTimeMillis is when the broker accepted the commit (Unix milliseconds); the proposer
	// sets it, so application stays deterministic.
	CommitTimeMillis int64 `json:"commitTime"`
}

// OffsetCommit is one partition's commit, as carried in a commit-offsets log entry and in
// snapshots.
type OffsetCommit struct {
	Group string `json:"group"`
	// Coordinator, when set, is the node that accepted the commit as the group's coordinator: the
	// commit applies only if that node still coordinates the group when the entry applies.
	Coordinator *int32 `json:"coordinator,omitempty"`
	// LiveSince, when set, is the Metadata.LiveSince the coordinator saw when it accepted the
	// commit: the commit applies only if the live broker set has not changed since. A coordinator
	// that lost the group and got it back (fenced, then unfenced) is the coordinator again, but a
	// commit it accepted before is older than what the members committed elsewhere meanwhile.
	LiveSince *uint64 `json:"liveSince,omitempty"`
	TopicPartition
	CommittedOffset
}

// GroupOffsets is one group's committed offsets. It is shared between snapshots: never modify it.
type GroupOffsets map[TopicPartition]CommittedOffset

// Offsets is an immutable snapshot of every group's committed offsets. Consumer offsets change far
// more often than the rest of the metadata, so they are kept apart from Metadata: a commit neither
// bumps Metadata.Version nor wakes Subscribe callbacks.
type Offsets struct {
	// Index is the Raft index of the last applied offsets change (0 before any).
	Index  uint64
	groups map[string]GroupOffsets
}

func emptyOffsets() *Offsets { return &Offsets{groups: map[string]GroupOffsets{}} }

// Groups returns the ids of groups with committed offsets, sorted.
func (o *Offsets) Groups() []string { return slices.Sorted(maps.Keys(o.groups)) }

// Group returns a group's committed offsets (nil when it has none). The map must not be modified.
func (o *Offsets) Group(group string) GroupOffsets { return o.groups[group] }

// Lookup returns a group's committed offset for one partition.
func (o *Offsets) Lookup(group, topic string, partition int32) (CommittedOffset, bool) {
	committed, ok := o.groups[group][TopicPartition{Topic: topic, Partition: partition}]
	return committed, ok
}

// withCommits returns a copy of o holding commits; later commits of one partition win. Only the
// groups touched are copied.
func (o *Offsets) withCommits(commits []OffsetCommit) *Offsets {
	next := &Offsets{Index: o.Index, groups: maps.Clone(o.groups)}
	copied := map[string]bool{}
	for _, c := range commits {
		group := next.groups[c.Group]
		if !copied[c.Group] {
			group = maps.Clone(group)
			if group == nil {
				group = GroupOffsets{}
			}
			next.groups[c.Group] = group
			copied[c.Group] = true
		}
		group[c.TopicPartition] = c.CommittedOffset
	}
	return next
}

// withoutGroups returns a copy of o without the named groups' offsets.
func (o *Offsets) withoutGroups(groups []string) *Offsets {
	next := &Offsets{Index: o.Index, groups: maps.Clone(o.groups)}
	for _, g := range groups {
		delete(next.groups, g)
	}
	return next
}

// withoutPartitions returns a copy of o without one group's offsets for the given partitions; a
// group left with none disappears.
func (o *Offsets) withoutPartitions(group string, partitions []TopicPartition) *Offsets {
	next := &Offsets{Index: o.Index, groups: maps.Clone(o.groups)}
	offsets := maps.Clone(next.groups[group])
	for _, tp := range partitions {
		delete(offsets, tp)
	}
	if len(offsets) == 0 {
		delete(next.groups, group)
	} else {
		next.groups[group] = offsets
	}
	return next
}

// withoutTopic returns a copy of o without any group's offsets for topic (a group left with none
// disappears) and whether there were any.
func (o *Offsets) withoutTopic(topic string) (*Offsets, bool) {
	next := &Offsets{Index: o.Index, groups: maps.Clone(o.groups)}
	changed := false
	for group, offsets := range o.groups {
		kept := maps.Clone(offsets)
		maps.DeleteFunc(kept, func(tp TopicPartition, _ CommittedOffset) bool { return tp.Topic == topic })
		switch {
		case len(kept) == len(offsets):
			continue
		case len(kept) == 0:
			delete(next.groups, group)
		default:
			next.groups[group] = kept
		}
		changed = true
	}
	return next, changed
}

// sortedCommits lists every committed offset ordered by group, topic and partition: the snapshot
// form, equal bytes for equal states.
func (o *Offsets) sortedCommits() []OffsetCommit {
	var out []OffsetCommit
	for _, group := range o.Groups() {
		for tp, committed := range o.groups[group] {
			out = append(out, OffsetCommit{Group: group, TopicPartition: tp, CommittedOffset: committed})
		}
	}
	slices.SortFunc(out, func(a, b OffsetCommit) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}
