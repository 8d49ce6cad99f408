package broker

// JoinGroup v0-v9. A member joins (or rejoins) a consumer group; the answer waits until the join
// phase ends (every known member rejoined, or the rebalance timeout), so the request is parked in
// the group and answered from whichever request or timer ends the phase: the connection's worker
// never waits. v4+ members without an id get one with MEMBER_ID_REQUIRED and join again with it;
// static members (group.instance.id, v5+) rejoin without a rebalance and fence their old id. Only
// the leader receives the member list. Refusals: empty group id INVALID_GROUP_ID; session timeout
// outside the broker's bounds INVALID_SESSION_TIMEOUT; protocol type or protocols not matching the
// group INCONSISTENT_GROUP_PROTOCOL; unknown member id UNKNOWN_MEMBER_ID; a fenced static member
// FENCED_INSTANCE_ID; shutting down or not the metadata leader COORDINATOR_NOT_AVAILABLE.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleJoinGroup(r *request, req *kmsg.JoinGroupRequest) {
	fail := func(err error) {
		answerJoin(r, req, group.JoinResponse{Err: err, MemberID: req.MemberID, Generation: -1})
	}
	if req.Group == "" {
		fail(fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID))
		return
	}
	if err := b.checkCoordinator(req.Group); err != nil {
		fail(err)
		return
	}
	if err := b.groupTypeConflict(req.Group, groupKindClassic); err != nil {
		fail(err)
		return
	}
	join := group.JoinRequest{
		MemberID:             req.MemberID,
		InstanceID:           optionalString(req.InstanceID),
		ClientID:             optionalString(r.header.ClientID),
		ClientHost:           clientHost(r),
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		ProtocolType:         req.ProtocolType,
		RequireKnownMemberID: req.Version >= 4,
		NewMemberID:          newMemberID(r.header.ClientID, req.InstanceID),
	}
	if req.Version == 0 {
		join.RebalanceTimeout = join.SessionTimeout
	}
	for _, p := range req.Protocols {
		join.Protocols = append(join.Protocols, group.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	err := b.groups.with(req.Group, true, func(e *groupEntry, g *group.Group, now time.Time) group.Outcome {
		resp, parked, out := g.Join(now, join)
		if !parked {
			answerJoin(r, req, resp)
			return out
		}
		if previous, ok := e.mu.joins[resp.MemberID]; ok {
			// The member sent JoinGroup again before the first was answered (it gave up on it):
			// the newer one waits, the older one is told to rejoin.
			answerJoin(previous.r, previous.req, group.JoinResponse{
				Err: fmt.Errorf("broker: superseded join: %w", protocol.RebalanceInProgress), MemberID: resp.MemberID, Generation: -1})
		}
		e.mu.joins[resp.MemberID] = &parkedJoin{r: r, req: req}
		return out
	})
	if err != nil {
		fail(err)
	}
}

// answerJoin encodes a JoinGroup answer at the request's version.
func answerJoin(r *request, req *kmsg.JoinGroupRequest, answer group.JoinResponse) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = protocol.CodeFor(answer.Err)
	resp.MemberID = answer.MemberID
	resp.Generation = answer.Generation
	resp.LeaderID = answer.Leader
	resp.SkipAssignment = answer.SkipAssignment
	if answer.Err == nil {
		protocolType, protocolName := answer.ProtocolType, answer.Protocol
		resp.ProtocolType, resp.Protocol = &protocolType, &protocolName
	} else {
		r.failed()
	}
	for _, m := range answer.Members {
		member := kmsg.NewJoinGroupResponseMember()
		member.MemberID = m.MemberID
		if m.InstanceID != "" {
			instance := m.InstanceID
			member.InstanceID = &instance
		}
		member.ProtocolMetadata = m.Metadata
		resp.Members = append(resp.Members, member)
	}
	r.respond(resp)
}
