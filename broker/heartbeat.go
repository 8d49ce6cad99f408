package broker

// Heartbeat v0-v4. Keeps a member's session alive. Answers: REBALANCE_IN_PROGRESS during a join
// phase (the member rejoins); unknown group or member UNKNOWN_MEMBER_ID; fenced static member
// FENCED_INSTANCE_ID; wrong generation ILLEGAL_GENERATION; empty group id INVALID_GROUP_ID.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleHeartbeat(r *request, req *kmsg.HeartbeatRequest) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	err := b.checkCoordinator(req.Group)
	if req.Group == "" {
		err = fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	if err == nil {
		var answer error
		err = b.groups.with(req.Group, false, func(_ *groupEntry, g *group.Group, now time.Time) group.Outcome {
			answer = g.Heartbeat(now, req.MemberID, optionalString(req.InstanceID), req.Generation)
			return group.Outcome{}
		})
		if err == nil {
			err = answer
		}
	}
	resp.ErrorCode = protocol.CodeFor(unknownGroupAsMember(err))
	if resp.ErrorCode != 0 && resp.ErrorCode != protocol.RebalanceInProgress.Code {
		r.failed()
	}
	r.respond(resp)
}
