package coordinator

import (
	"fmt"

	"github.com/sluice-mq/sluice/group"
)

// offsetsCommand is a command that changes consumer offsets rather than Metadata. The FSM applies
// it with applyOffsets; its apply (from command) is never called.
type offsetsCommand interface {
	command
	applyOffsets(state *Offsets, meta *Metadata) (next *Offsets, result applyResult)
}

// commitOffsetsCommand stores a batch of commits from any number of groups: one Raft entry for many
// OffsetCommit requests. The proposer checked group membership; application stores unconditionally.
type commitOffsetsCommand struct {
	Commits []OffsetCommit `json:"commits"`
}

func (*commitOffsetsCommand) kind() commandType { return commandCommitOffsets }

func (*commitOffsetsCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

func (c *commitOffsetsCommand) applyOffsets(state *Offsets, meta *Metadata) (*Offsets, applyResult) {
	for _, commit := range c.Commits {
		if commit.Group == "" || commit.Topic == "" || commit.Partition < 0 {
			return nil, applyResult{err: fmt.Errorf("%w: commit-offsets with group %q topic %q partition %d", errMalformedCommand,
				commit.Group, commit.Topic, commit.Partition)}
		}
	}
	commits := stillCoordinated(c.Commits, meta)
	if len(commits) == 0 {
		return nil, applyResult{}
	}
	return state.withCommits(commits), applyResult{}
}

// deleteGroupOffsetsCommand drops every committed offset of the named groups (DeleteGroups).
type deleteGroupOffsetsCommand struct {
	Groups []string `json:"groups"`
}

func (*deleteGroupOffsetsCommand) kind() commandType { return commandDeleteGroupOffsets }

func (*deleteGroupOffsetsCommand) apply(*Metadata) (*Metadata, applyResult) {
	return nil, applyResult{}
}

func (c *deleteGroupOffsetsCommand) applyOffsets(state *Offsets, _ *Metadata) (*Offsets, applyResult) {
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

func (c *deletePartitionOffsetsCommand) applyOffsets(state *Offsets, _ *Metadata) (*Offsets, applyResult) {
	if c.Group == "" {
		return nil, applyResult{err: fmt.Errorf("%w: delete-partition-offsets without a group", errMalformedCommand)}
	}
	if state.Group(c.Group) == nil || len(c.Partitions) == 0 {
		return nil, applyResult{}
	}
	return state.withoutPartitions(c.Group, c.Partitions), applyResult{}
}

// stillCoordinated drops the commits accepted by a node that no longer coordinates their group in
// meta (the metadata when the entry applies): a commit that reached the controller late, after
// its group moved and the new coordinator's members committed, must not overwrite theirs. The
// proposing broker sees its commit missing from Offsets and answers NOT_COORDINATOR. Commits
// without OffsetCommit.Coordinator always apply.
func stillCoordinated(commits []OffsetCommit, meta *Metadata) []OffsetCommit {
	var live []int32
	kept := commits[:0:0]
	for _, commit := range commits {
		if commit.Coordinator != nil {
			if live == nil {
				live = meta.LiveBrokerIDs()
			}
			if group.CoordinatorFor(commit.Group, live) != *commit.Coordinator {
				continue
			}
		}
		if commit.LiveSince != nil && *commit.LiveSince != meta.LiveSince {
			continue
		}
		kept = append(kept, commit)
	}
	return kept
}
