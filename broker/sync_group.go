package broker

// SyncGroup v0-v5. After a join phase, the leader sends the assignment and every member receives
// its part. A follower's SyncGroup that arrives before the leader's is parked in the group and
// answered when the leader's arrives (never waiting on the connection's worker), or with
// REBALANCE_IN_PROGRESS when the leader has not synced within the group's rebalance timeout (the
// leader is then removed and the others rejoin). In a Stable group a member gets its current
// assignment at once. Refusals: empty group id INVALID_GROUP_ID; unknown group or member
// UNKNOWN_MEMBER_ID; fenced static member FENCED_INSTANCE_ID; wrong generation ILLEGAL_GENERATION; a
// join phase in progress REBALANCE_IN_PROGRESS; protocol type or name (v5) other than the group's
// INCONSISTENT_GROUP_PROTOCOL.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleSyncGroup(r *request, req *kmsg.SyncGroupRequest) {
	fail := func(err error) {
		answerSync(r, req, group.SyncResponse{Err: err, MemberID: req.MemberID})
	}
	if req.Group == "" {
		fail(fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID))
		return
	}
	if err := b.checkCoordinator(req.Group); err != nil {
		fail(err)
		return
	}
	sync := group.SyncRequest{
		MemberID:     req.MemberID,
		InstanceID:   optionalString(req.InstanceID),
		Generation:   req.Generation,
		ProtocolType: optionalString(req.ProtocolType),
		Protocol:     optionalString(req.Protocol),
		Assignments:  make(map[string][]byte, len(req.GroupAssignment)),
	}
	for _, a := range req.GroupAssignment {
		sync.Assignments[a.MemberID] = a.MemberAssignment
	}
	err := b.groups.with(req.Group, false, func(e *groupEntry, g *group.Group, now time.Time) group.Outcome {
		resp, parked, out := g.Sync(now, sync)
		if !parked {
			answerSync(r, req, resp)
			return out
		}
		if previous, ok := e.mu.syncs[resp.MemberID]; ok {
			answerSync(previous.r, previous.req, group.SyncResponse{
				Err: fmt.Errorf("broker: superseded sync: %w", protocol.RebalanceInProgress), MemberID: resp.MemberID})
		}
		e.mu.syncs[resp.MemberID] = &parkedSync{r: r, req: req}
		return out
	})
	if err != nil {
		fail(unknownGroupAsMember(err))
	}
}

// unknownGroupAsMember turns GROUP_ID_NOT_FOUND into UNKNOWN_MEMBER_ID, which is what Kafka answers
// members of a group it does not know: they join again.
func unknownGroupAsMember(err error) error {
	if protocol.CodeFor(err) == protocol.GroupIDNotFound.Code {
		return fmt.Errorf("%w: %w", protocol.UnknownMemberID, err)
	}
	return err
}

// answerSync encodes a SyncGroup answer at the request's version.
func answerSync(r *request, req *kmsg.SyncGroupRequest, answer group.SyncResponse) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = protocol.CodeFor(answer.Err)
	if answer.Err == nil {
		protocolType, protocolName := answer.ProtocolType, answer.Protocol
		resp.ProtocolType, resp.Protocol = &protocolType, &protocolName
		resp.MemberAssignment = answer.Assignment
	} else {
		r.failed()
	}
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	r.respond(resp)
}
