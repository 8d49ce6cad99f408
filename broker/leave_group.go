package broker

// LeaveGroup v0-v5. Members leave (v0-v2 one member id; v3+ a batch of members by member id and/or
// group.instance.id); the group rebalances without them. Per member (v3+; top-level for v0-v2):
// unknown member UNKNOWN_MEMBER_ID, an instance id held by another member id FENCED_INSTANCE_ID.
// Empty group id INVALID_GROUP_ID; an unknown group UNKNOWN_MEMBER_ID.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleLeaveGroup(r *request, req *kmsg.LeaveGroupRequest) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	var leaving []group.LeavingMember
	if req.Version < 3 {
		leaving = []group.LeavingMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			leaving = append(leaving, group.LeavingMember{MemberID: m.MemberID, InstanceID: optionalString(m.InstanceID)})
		}
	}
	errs := make([]error, len(leaving))
	err := b.checkCoordinator(req.Group)
	if req.Group == "" {
		err = fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	if err == nil {
		err = b.groups.with(req.Group, false, func(_ *groupEntry, g *group.Group, now time.Time) group.Outcome {
			var out group.Outcome
			errs, out = g.Leave(now, leaving)
			return out
		})
		if protocol.CodeFor(err) == protocol.GroupIDNotFound.Code && req.Version >= 3 {
			for i := range errs {
				errs[i] = fmt.Errorf("broker: group %q: %w", req.Group, protocol.UnknownMemberID)
			}
			err = nil
		}
	}
	resp.ErrorCode = protocol.CodeFor(unknownGroupAsMember(err))
	if req.Version < 3 && err == nil && len(errs) == 1 {
		resp.ErrorCode = protocol.CodeFor(errs[0])
	}
	if req.Version >= 3 && err == nil {
		for i, m := range req.Members {
			member := kmsg.NewLeaveGroupResponseMember()
			member.MemberID, member.InstanceID = m.MemberID, m.InstanceID
			member.ErrorCode = protocol.CodeFor(errs[i])
			resp.Members = append(resp.Members, member)
		}
	}
	if resp.ErrorCode != 0 {
		r.failed()
	}
	r.respond(resp)
}
