package broker

// ConsumerGroupHeartbeat v1 (KIP-848): joins (epoch 0), heartbeats, and leaves (-1; static members
// -2) a consumer group this broker coordinates; the broker computes assignments (assignors
// "uniform" and "range", consumergroup package) and answers each member its assignment whenever it
// changes or the member sent its full state. Answers: NOT_COORDINATOR, INVALID_REQUEST (no group or
// member id, a join without a subscription or with owned partitions), UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
// GROUP_MAX_SIZE_REACHED, and GROUP_ID_NOT_FOUND for a group id used by a classic or share group.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/consumergroup"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleConsumerGroupHeartbeat(r *request, req *kmsg.ConsumerGroupHeartbeatRequest) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(err error) {
		resp.ErrorCode, resp.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
		r.failed()
		r.respond(resp)
	}
	if req.Group == "" {
		fail(fmt.Errorf("broker: empty group id: %w", protocol.InvalidRequest))
		return
	}
	if err := b.checkCoordinator(req.Group); err != nil {
		fail(err)
		return
	}
	if err := b.groupTypeConflict(req.Group, groupKindConsumer); err != nil {
		fail(err)
		return
	}
	meta := b.coordinator.Metadata()
	topics := make(map[string]consumergroup.TopicInfo, len(meta.Topics))
	for name, t := range meta.Topics {
		topics[name] = consumergroup.TopicInfo{ID: t.ID, Partitions: int32(len(t.Partitions))}
	}
	hb := consumergroup.HeartbeatRequest{
		MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, InstanceID: optionalString(req.InstanceID), RackID: req.RackID,
		SubscribedNames: req.SubscribedTopicNames, SubscribedRegex: req.SubscribedTopicRegex, ServerAssignor: req.ServerAssignor,
		RebalanceTimeout: time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		ClientID:         optionalString(r.header.ClientID), ClientHost: clientHost(r),
	}
	if req.Topics != nil {
		hb.Owned = consumergroup.Assignment{}
		for _, t := range req.Topics {
			hb.Owned[t.TopicID] = append(hb.Owned[t.TopicID], t.Partitions...)
		}
	}
	c := b.consumerGroups
	now := time.Now()
	c.mu.Lock()
	g := c.groupLocked(req.Group, true, now)
	answer, err := g.Heartbeat(now, hb, topics)
	dirty := g.Dirty()
	c.mu.Unlock()
	if dirty {
		c.wakePersister()
	}
	if err != nil {
		fail(err)
		return
	}
	memberID := req.MemberID
	resp.MemberID = &memberID
	resp.MemberEpoch = answer.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(answer.HeartbeatInterval / time.Millisecond)
	if answer.Assignment != nil {
		assignment := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for id, partitions := range answer.Assignment {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = id, partitions
			assignment.Topics = append(assignment.Topics, t)
		}
		resp.Assignment = &assignment
	}
	r.respond(resp)
}
