package broker

// OffsetForLeaderEpoch v0-v4 (API 23). For each partition the leader answers, from its epoch
// history, the largest epoch at or below the requested one and the offset where that epoch ends
// (the next epoch's start, or the log end for the current epoch): followers truncate a divergent
// tail there, and clients use it to detect log truncation after a leader change (KIP-320).
// Refusals per partition: unknown UNKNOWN_TOPIC_OR_PARTITION, not the leader NOT_LEADER_OR_FOLLOWER,
// a stale current_leader_epoch (v2+) FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH. An epoch
// older than every known one is answered with epoch -1 and offset -1 (UNDEFINED), as Kafka does.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleOffsetForLeaderEpoch(r *request, req *kmsg.OffsetForLeaderEpochRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	anyError := false
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			result := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			result.Partition = rp.Partition
			result.LeaderEpoch, result.EndOffset = -1, -1
			p, err := b.registry.partition(rt.Topic, rp.Partition)
			switch {
			case err != nil:
				result.ErrorCode = protocol.CodeFor(err)
			case req.Version >= 2 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch != p.state.Load().leaderEpoch:
				result.ErrorCode = protocol.FencedLeaderEpoch.Code
				if rp.CurrentLeaderEpoch > p.state.Load().leaderEpoch {
					result.ErrorCode = protocol.UnknownLeaderEpoch.Code
				}
			default:
				result.LeaderEpoch, result.EndOffset = p.replica.Epochs.EndOffsetFor(rp.LeaderEpoch, p.log.LogEndOffset())
			}
			if result.ErrorCode != 0 {
				anyError = true
			}
			t.Partitions = append(t.Partitions, result)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}
