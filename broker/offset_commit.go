package broker

// OffsetCommit v0-v8. The member and generation are checked against the group (generation -1 and no
// member id is a "simple" commit, accepted only for a group without members), then the offsets
// (offset, leader epoch from v6, metadata) go to the Raft coordinator's commit batcher, which puts
// the commits of many requests and groups into one Raft entry; the response is sent from the
// batcher's callback once the entry applied, never waiting on the connection's worker. Refusals:
// empty group id INVALID_GROUP_ID; unknown member UNKNOWN_MEMBER_ID; fenced static member
// FENCED_INSTANCE_ID; wrong generation, or a generation for a group with no members state,
// ILLEGAL_GENERATION; a group between JoinGroup and SyncGroup REBALANCE_IN_PROGRESS; unknown
// partitions and __consumer_offsets UNKNOWN_TOPIC_OR_PARTITION; metadata over 4096 bytes
// OFFSET_METADATA_TOO_LARGE; not the metadata leader NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE
// (also when this node cannot confirm its view fresh through a read barrier).

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

// maxOffsetMetadataBytes is Kafka's offset.metadata.max.bytes default.
const maxOffsetMetadataBytes = 4096

func (b *Broker) handleOffsetCommit(r *request, req *kmsg.OffsetCommitRequest) {
	// A node resumed after a pause, or cut off from the controller, must not validate a commit
	// against a group it no longer coordinates: the commit would land after newer ones made
	// elsewhere and move the group's offset back. A read barrier first makes its metadata fresh
	// (offset_fetch.go); concurrent commits share one barrier round.
	b.coordinator.ReadBarrier(func(err error) { b.commitOffsets(r, req, err) })
}

// commitOffsets validates and stores a commit once the read barrier passed (barrierErr nil) or
// refuses it with COORDINATOR_NOT_AVAILABLE.
func (b *Broker) commitOffsets(r *request, req *kmsg.OffsetCommitRequest, barrierErr error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	// codes[i][j] answers req.Topics[i].Partitions[j].
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	finish := func() {
		failed := false
		for i, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				failed = failed || rp.ErrorCode != 0
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if failed {
			r.failed()
		}
		r.respond(resp)
	}
	refuseAll := func(err error) {
		for i := range codes {
			for j := range codes[i] {
				codes[i][j] = protocol.CodeFor(err)
			}
		}
		finish()
	}
	if req.Group == "" {
		refuseAll(fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID))
		return
	}
	if barrierErr != nil {
		refuseAll(fmt.Errorf("broker: this node's view of group %q cannot be confirmed fresh: %w: %w", req.Group, protocol.CoordinatorNotAvailable, barrierErr))
		return
	}
	if err := b.checkCoordinator(req.Group); err != nil {
		refuseAll(err)
		return
	}
	generation := req.Generation
	if req.Version == 0 {
		generation = -1
	}
	instanceID := optionalString(req.InstanceID)
	var answer error
	err := b.groups.with(req.Group, false, func(_ *groupEntry, g *group.Group, now time.Time) group.Outcome {
		answer = g.CheckCommit(now, req.MemberID, instanceID, generation)
		return group.Outcome{}
	})
	if handled, consumerErr := b.consumerGroups.checkCommit(req.Group, req.MemberID, generation); handled {
		err, answer = nil, consumerErr // a KIP-848 group: member and epoch checked there
	}
	switch {
	case protocol.CodeFor(err) == protocol.GroupIDNotFound.Code:
		// No members state (a new group, or one from before a restart): only simple commits.
		if generation >= 0 || req.MemberID != "" || instanceID != "" {
			answer = fmt.Errorf("broker: group %q has no generation %d: %w", req.Group, generation, protocol.IllegalGeneration)
		}
	case err != nil:
		answer = err
	}
	if answer != nil {
		refuseAll(answer)
		return
	}

	meta := b.coordinator.Metadata()
	nowMillis := time.Now().UnixMilli()
	var commits []coordinator.OffsetCommit
	var accepted [][2]int // indexes into codes of the partitions in commits
	for i, t := range req.Topics {
		topic := meta.Topics[t.Topic]
		for j, p := range t.Partitions {
			switch {
			case topic == nil || p.Partition < 0 || int(p.Partition) >= len(topic.Partitions):
				codes[i][j] = protocol.UnknownTopicOrPartition.Code
				continue
			case p.Metadata != nil && len(*p.Metadata) > maxOffsetMetadataBytes:
				codes[i][j] = protocol.OffsetMetadataTooLarge.Code
				continue
			}
			epoch := int32(-1)
			if req.Version >= 6 {
				epoch = p.LeaderEpoch
			}
			commits = append(commits, coordinator.OffsetCommit{
				Group:          req.Group,
				Coordinator:    &b.config.NodeID,
				LiveSince:      &meta.LiveSince,
				TopicPartition: coordinator.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				CommittedOffset: coordinator.CommittedOffset{
					Offset: p.Offset, LeaderEpoch: epoch, Metadata: optionalString(p.Metadata), CommitTimeMillis: nowMillis,
				},
			})
			accepted = append(accepted, [2]int{i, j})
		}
	}
	if len(commits) == 0 {
		finish()
		return
	}
	b.coordinator.CommitOffsets(commits, func(err error) {
		if err != nil {
			b.logger.Warn("offset commit", "group", req.Group, "err", err)
			for _, at := range accepted {
				codes[at[0]][at[1]] = groupCommitErrorCode(err)
			}
			finish()
			return
		}
		// A commit that applied after the group moved to another coordinator was dropped
		// (coordinator.OffsetCommit.Coordinator): it is not in the offsets now applied here.
		offsets := b.coordinator.Offsets()
		for k, commit := range commits {
			stored, ok := offsets.Lookup(commit.Group, commit.Topic, commit.Partition)
			if !ok || stored.CommitTimeMillis < commit.CommitTimeMillis || (stored.CommitTimeMillis == commit.CommitTimeMillis && stored.Offset != commit.Offset) {
				codes[accepted[k][0]][accepted[k][1]] = protocol.NotCoordinator.Code
			}
		}
		finish()
	})
}
