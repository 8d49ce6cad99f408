package coordinator

import "fmt"

// offsetsCommand is a command that changes consumer offsets rather than Metadata. The FSM applies
// it with applyOffsets; its apply (from command) is never called.
type offsetsCommand interface {
	command
	applyOffsets(state *Offsets) (next *Offsets, result applyResult)
}

// commitOffsetsCommand stores a batch of commits from any number of groups: one Raft entry for many
// OffsetCommit requests. The proposer checked group membership; application stores unconditionally.
type commitOffsetsCommand struct {
	Commits []OffsetCommit `json:"commits"`
}

func (*commitOffsetsCommand) kind() commandType { return commandCommitOffsets }

func (*commitOffsetsCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

func (c *commitOffsetsCommand) applyOffsets(state *Offsets) (*Offsets, applyResult) {
	for _, commit := range c.Commits {
		if commit.Group == "" || commit.Topic == "" || commit.Partition < 0 {
			return nil, applyResult{err: fmt.Errorf("%w: commit-offsets with group %q topic %q partition %d", errMalformedCommand,
				commit.Group, commit.Topic, commit.Partition)}
		}
	}
	if len(c.Commits) == 0 {
		return nil, applyResult{}
	}
	return state.withCommits(c.Commits), applyResult{}
}

// deleteGroupOffsetsCommand drops every committed offset of the named groups (DeleteGroups).
type deleteGroupOffsetsCommand struct {
	Groups []string `json:"groups"`
}

func (*deleteGroupOffsetsCommand) kind() commandType { return commandDeleteGroupOffsets }

func (*deleteGroupOffsetsCommand) apply(*Metadata) (*Metadata, applyResult) {
	return nil, applyResult{}
}

func (c *deleteGroupOffsetsCommand) applyOffsets(state *Offsets) (*Offsets, applyResult) {
	if len(c.Groups) == 0 {
		return nil, applyResult{}
	}
	return state.withoutGroups(c.Groups), applyResult{}
}

// deletePartitionOffsetsCommand drops one group's committed offsets for some partitions
// (OffsetDelete).
type deletePartitionOffsetsCommand struct {
	Group      string           `json:"group"`
	Partitions []TopicPartition `json:"partitions"`
}

func (*deletePartitionOffsetsCommand) kind() commandType { return commandDeletePartitionOffsets }

func (*deletePartitionOffsetsCommand) apply(*Metadata) (*Metadata, applyResult) {
	return nil, applyResult{}
}

func (c *deletePartitionOffsetsCommand) applyOffsets(state *Offsets) (*Offsets, applyResult) {
	if c.Group == "" {
		return nil, applyResult{err: fmt.Errorf("%w: delete-partition-offsets without a group", errMalformedCommand)}
	}
	if state.Group(c.Group) == nil || len(c.Partitions) == 0 {
		return nil, applyResult{}
	}
	return state.withoutPartitions(c.Group, c.Partitions), applyResult{}
}
