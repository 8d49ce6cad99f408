package broker

// ShareGroupDescribe v0-v1 (KIP-932): members, epochs and assignments of share groups this broker
// coordinates. Answers per group: NOT_COORDINATOR, GROUP_ID_NOT_FOUND for an id that is no share
// group (Kafka's answer for an unknown id or a group of another type), INVALID_GROUP_ID for "".
// Authorized operations are not tracked (no ACLs): the field is Kafka's "not requested" value.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleShareGroupDescribe(r *request, req *kmsg.ShareGroupDescribeRequest) {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	meta := b.coordinator.Metadata()
	topicNames := map[[16]byte]string{}
	for name, t := range meta.Topics {
		topicNames[t.ID] = name
	}
	anyError := false
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		g.AuthorizedOperations = -2147483648
		err := b.checkCoordinator(id)
		if id == "" {
			err = fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
		}
		if err == nil && !b.shares.knownShareGroup(id) {
			err = fmt.Errorf("broker: group %q is not a share group: %w", id, protocol.GroupIDNotFound)
		}
		if err == nil {
			m := b.shares
			m.mu.Lock()
			e := m.groupLocked(id, true)
			g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = e.group.State(), e.group.Epoch(), e.group.Epoch(), "simple"
			for _, member := range e.group.Members() {
				dm := kmsg.NewShareGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = member.ID, member.Epoch, member.ClientID, member.ClientHost
				if member.RackID != "" {
					rack := member.RackID
					dm.RackID = &rack
				}
				dm.SubscribedTopicNames = member.Subscribed
				for _, t := range member.Assignment {
					tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
					tp.TopicID, tp.Topic, tp.Partitions = t.ID, t.Topic, t.Partitions
					dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
				}
				g.Members = append(g.Members, dm)
			}
			m.mu.Unlock()
		}
		if err != nil {
			g.ErrorCode, g.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
			anyError = true
		}
		resp.Groups = append(resp.Groups, g)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}
