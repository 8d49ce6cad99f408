package broker

// OffsetDelete v0: deletes a group's committed offsets for some partitions. A consumer group with
// members keeps the offsets of topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC per
// partition); a non-consumer group with members refuses everything (NON_EMPTY_GROUP). Other
// refusals: unknown group (no members state, no offsets) GROUP_ID_NOT_FOUND; empty id
// INVALID_GROUP_ID; unknown partitions UNKNOWN_TOPIC_OR_PARTITION; not the metadata leader
// COORDINATOR_NOT_AVAILABLE.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleOffsetDelete(r *request, req *kmsg.OffsetDeleteRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	respond := func(topLevel error, codes [][]int16) {
		resp.ErrorCode = protocol.CodeFor(topLevel)
		failed := resp.ErrorCode != 0
		if topLevel == nil {
			for i, t := range req.Topics {
				rt := kmsg.NewOffsetDeleteResponseTopic()
				rt.Topic = t.Topic
				for j, p := range t.Partitions {
					rp := kmsg.NewOffsetDeleteResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
					failed = failed || rp.ErrorCode != 0
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		if failed {
			r.failed()
		}
		r.respond(resp)
	}
	if req.Group == "" {
		respond(fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID), nil)
		return
	}
	if err := b.checkCoordinator(req.Group); err != nil {
		respond(err, nil)
		return
	}
	var subscribed map[string]bool
	var refusal error
	err := b.groups.with(req.Group, false, func(_ *groupEntry, g *group.Group, _ time.Time) group.Outcome {
		if g.Len() == 0 {
			return group.Outcome{}
		}
		if g.ProtocolType() != "consumer" {
			refusal = fmt.Errorf("broker: group %q has members: %w", req.Group, protocol.NonEmptyGroup)
			return group.Outcome{}
		}
		subscribed = map[string]bool{}
		for _, metadata := range g.SelectedMetadata() {
			var subscription kmsg.ConsumerMemberMetadata
			if subscription.ReadFrom(metadata) == nil {
				for _, topic := range subscription.Topics {
					subscribed[topic] = true
				}
			}
		}
		return group.Outcome{}
	})
	offsets := b.coordinator.Offsets()
	switch {
	case protocol.CodeFor(err) == protocol.GroupIDNotFound.Code && offsets.Group(req.Group) == nil:
		respond(err, nil)
		return
	case protocol.CodeFor(err) == protocol.GroupIDNotFound.Code:
	case err != nil:
		respond(err, nil)
		return
	case refusal != nil:
		respond(refusal, nil)
		return
	}
	meta := b.coordinator.Metadata()
	codes := make([][]int16, len(req.Topics))
	var partitions []coordinator.TopicPartition
	var deleting [][2]int
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		topic := meta.Topics[t.Topic]
		for j, p := range t.Partitions {
			switch {
			case topic == nil || p.Partition < 0 || int(p.Partition) >= len(topic.Partitions):
				codes[i][j] = protocol.UnknownTopicOrPartition.Code
			case subscribed[t.Topic]:
				codes[i][j] = protocol.GroupSubscribedToTopic.Code
			default:
				partitions = append(partitions, coordinator.TopicPartition{Topic: t.Topic, Partition: p.Partition})
				deleting = append(deleting, [2]int{i, j})
			}
		}
	}
	if len(partitions) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), groupDeleteTimeout)
		err := b.coordinator.DeletePartitionOffsets(ctx, req.Group, partitions)
		cancel()
		if err != nil {
			for _, at := range deleting {
				codes[at[0]][at[1]] = groupCommitErrorCode(err)
			}
		}
	}
	respond(nil, codes)
}
