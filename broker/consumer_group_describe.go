package broker

// ConsumerGroupDescribe v0-v1 (KIP-848): state, epochs, assignor and members (subscriptions,
// current and target assignments) of consumer groups this broker coordinates. Per group:
// NOT_COORDINATOR, INVALID_GROUP_ID for "", GROUP_ID_NOT_FOUND for an id that is no KIP-848 group.
// Authorized operations are not tracked (INT32_MIN).

import (
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/consumergroup"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleConsumerGroupDescribe(r *request, req *kmsg.ConsumerGroupDescribeRequest) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	index := newTopicIndex(b.coordinator.Metadata())
	describe := func(a consumergroup.Assignment) kmsg.Assignment {
		out := kmsg.NewAssignment()
		for id, partitions := range a {
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = id, index.names[id], partitions
			out.TopicPartitions = append(out.TopicPartitions, tp)
		}
		return out
	}
	anyError := false
	for _, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group, g.AuthorizedOperations = id, math.MinInt32
		err := b.checkCoordinator(id)
		if id == "" {
			err = fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
		}
		if err == nil && !b.consumerGroups.known(id) {
			err = fmt.Errorf("broker: group %q is not a consumer group: %w", id, protocol.GroupIDNotFound)
		}
		if err == nil {
			c := b.consumerGroups
			c.mu.Lock()
			group := c.groupLocked(id, true, time.Now())
			g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = group.State(), group.Epoch(), group.AssignmentEpoch(), consumergroup.AssignorUniform
			for _, m := range group.Members() {
				if m.ServerAssignor == consumergroup.AssignorRange {
					g.AssignorName = consumergroup.AssignorRange
				}
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
				if m.InstanceID != "" {
					instance := m.InstanceID
					dm.InstanceID = &instance
				}
				if m.RackID != "" {
					rack := m.RackID
					dm.RackID = &rack
				}
				if m.SubscribedRegex != "" {
					regex := m.SubscribedRegex
					dm.SubscribedTopicRegex = &regex
				}
				dm.SubscribedTopics = m.SubscribedNames
				dm.Assignment, dm.TargetAssignment = describe(m.Assigned), describe(m.Target)
				dm.MemberType = 1 // consumer protocol member
				g.Members = append(g.Members, dm)
			}
			c.mu.Unlock()
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
