package broker

// DescribeGroups v0-v5: state, protocol type, selected protocol and members (client id, host, and
// in Stable the member's metadata and assignment) of each group. A group whose last member left is
// Empty (with its protocol type) until group.Config.EmptyRetention expires it; a group with committed
// offsets but no members state is Empty; a group the broker does not know at all is Dead, with no error, as in
// Kafka. Authorized operations are not computed (INT32_MIN). Refusals: not the metadata leader
// COORDINATOR_NOT_AVAILABLE; empty group id INVALID_GROUP_ID.

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleDescribeGroups(r *request, req *kmsg.DescribeGroupsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	summaries := b.groups.describe(req.Groups)
	offsets := b.coordinator.Offsets()
	coordinatorErr := b.checkCoordinator
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		rg.AuthorizedOperations = math.MinInt32
		err := coordinatorErr(id)
		if id == "" {
			err = fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
		}
		if rg.ErrorCode = protocol.CodeFor(err); rg.ErrorCode != 0 {
			r.failed()
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		summary, known := summaries[id]
		switch {
		case known:
		case offsets.Group(id) != nil:
			summary = groupSummary{state: group.Empty}
		default:
			summary = groupSummary{state: group.Dead}
		}
		rg.State, rg.ProtocolType, rg.Protocol = summary.state.String(), summary.protocolType, summary.protocol
		for _, m := range summary.members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.ClientID, rm.ClientHost = m.ID, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				instance := m.InstanceID
				rm.InstanceID = &instance
			}
			rm.ProtocolMetadata, rm.MemberAssignment = []byte{}, []byte{}
			if summary.state == group.Stable {
				for _, p := range m.Protocols {
					if p.Name == summary.protocol {
						rm.ProtocolMetadata = p.Metadata
					}
				}
				if m.Assignment != nil {
					rm.MemberAssignment = m.Assignment
				}
			}
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	r.respond(resp)
}
