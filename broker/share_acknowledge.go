package broker

// ShareAcknowledge v1-v2 (KIP-932; v2 renew acks, KIP-1222). Applies a member's acknowledgements
// (accept, release, reject, renew; gap archives) within its share session; epoch -1 then closes the
// session and releases what the member still holds here. Top level: INVALID_REQUEST (no group or
// member id), SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH (including epoch 0: a session is
// opened by ShareFetch only). Per partition: UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER,
// INVALID_RECORD_STATE (an offset the member does not hold: none of the partition's
// acknowledgements apply), INVALID_REQUEST (malformed ranges or types).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleShareAcknowledge(r *request, req *kmsg.ShareAcknowledgeRequest) {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := optionalString(req.GroupID), optionalString(req.MemberID)
	fail := func(code int16, message string) {
		resp.ErrorCode, resp.ErrorMessage = code, &message
		r.failed()
		r.respond(resp)
	}
	if group == "" || member == "" {
		fail(protocol.InvalidRequest.Code, "share acknowledge without a group or member id")
		return
	}
	if req.ShareSessionEpoch == 0 {
		fail(protocol.InvalidShareSessionEpoch.Code, "share acknowledge cannot open a share session")
		return
	}
	index := newTopicIndex(b.coordinator.Metadata())
	now := time.Now()
	m := b.shares
	m.mu.Lock()
	_, err := m.sessionLocked(group, member, req.ShareSessionEpoch, r.session)
	m.mu.Unlock()
	if err != nil {
		fail(protocol.CodeFor(err), err.Error())
		return
	}
	leaders := map[int32]bool{}
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		name, known := index.names[t.TopicID]
		for _, p := range t.Partitions {
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if !known {
				rp.ErrorCode = protocol.UnknownTopicID.Code
			} else if err := b.shareAcknowledge(sharePartitionKey{group, name, p.Partition}, member, ackBatches(p.AcknowledgementBatches), now); err != nil {
				rp.ErrorCode, rp.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
				if rp.ErrorCode == protocol.NotLeaderOrFollower.Code {
					rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = index.leaderOf(name, p.Partition)
					leaders[rp.CurrentLeader.LeaderID] = true
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for id := range leaders {
		if broker, ok := index.meta.Brokers[id]; ok && id >= 0 {
			ep := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
			ep.NodeID = id
			ep.Host, ep.Port = b.endpointFor(r, broker)
			resp.NodeEndpoints = append(resp.NodeEndpoints, ep)
		}
	}
	configs := m.groupConfigs(group)
	resp.AcquisitionLockTimeoutMillis = int32(m.partitionConfig(configs).LockDuration / time.Millisecond)
	if req.ShareSessionEpoch == shareFinalEpoch {
		m.mu.Lock()
		m.closeSessionLocked(group, member, now)
		m.mu.Unlock()
	}
	r.respond(resp)
}
