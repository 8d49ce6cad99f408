package broker

// ShareGroupHeartbeat v1 (KIP-932). Joins (epoch 0), keeps alive and leaves (epoch -1) a share
// group this broker coordinates; every member is assigned every partition of the topics it
// subscribes to (members share records, not partitions). A member id is generated for a join
// without one. Answers: NOT_COORDINATOR, INVALID_REQUEST (no group id, a join without topics),
// UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED, and INCONSISTENT_GROUP_PROTOCOL
// for a group id in use by a classic or KIP-848 consumer group. A leaving or expired member's
// acquired records on this broker are released at once.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/share"
)

func (b *Broker) handleShareGroupHeartbeat(r *request, req *kmsg.ShareGroupHeartbeatRequest) {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(err error) {
		resp.ErrorCode, resp.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
		r.failed()
		r.respond(resp)
	}
	if req.GroupID == "" {
		fail(fmt.Errorf("broker: empty group id: %w", protocol.InvalidRequest))
		return
	}
	if err := b.checkCoordinator(req.GroupID); err != nil {
		fail(err)
		return
	}
	if err := b.groupTypeConflict(req.GroupID, groupKindShare); err != nil {
		fail(err)
		return
	}
	memberID := req.MemberID
	if memberID == "" && req.MemberEpoch == 0 {
		memberID = newMemberID(nil, nil)
	}
	topics := map[string]share.TopicInfo{}
	for name, t := range b.coordinator.Metadata().Topics {
		topics[name] = share.TopicInfo{ID: t.ID, Partitions: int32(len(t.Partitions))}
	}
	m := b.shares
	m.mu.Lock()
	e := m.groupLocked(req.GroupID, true)
	before := e.group.Epoch()
	now := time.Now()
	answer, err := e.group.Heartbeat(now, share.HeartbeatRequest{
		MemberID: memberID, MemberEpoch: req.MemberEpoch, RackID: req.RackID, Subscribed: req.SubscribedTopicNames,
		ClientID: optionalString(r.header.ClientID), ClientHost: clientHost(r),
	}, topics)
	if err == nil && req.MemberEpoch == -1 {
		delete(m.mu.sessions, shareSessionKey{req.GroupID, memberID})
		m.releaseMemberLocked(req.GroupID, memberID, now)
	}
	if e.group.Epoch() != before {
		e.dirty = true
		m.wakePersister()
	}
	m.mu.Unlock()
	if err != nil {
		fail(err)
		return
	}
	resp.MemberID = &memberID
	resp.MemberEpoch = answer.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(answer.HeartbeatInterval / time.Millisecond)
	if answer.HasAssignment {
		assignment := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, t := range answer.Assignment {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = t.ID, t.Partitions
			assignment.TopicPartitions = append(assignment.TopicPartitions, tp)
		}
		resp.Assignment = &assignment
	}
	r.respond(resp)
}
