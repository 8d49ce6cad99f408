package broker

// ListOffsets v0-v7: latest (-1: the high watermark, which is also the last stable offset here),
// earliest (-2: the log start) and by timestamp (the first batch whose max timestamp reaches it; -1
// when none does). Max-timestamp lookups (-3, v7) are answered with offset -1, as for a topic without
// records, since the log does not yet track where its largest timestamp lies. v0 answers in the old
// style (a list holding one offset). Unknown partitions UNKNOWN_TOPIC_OR_PARTITION; a stale
// current_leader_epoch FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
)

func (b *Broker) handleListOffsets(r *request, req *kmsg.ListOffsetsRequest) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	anyError := false
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			result := kmsg.NewListOffsetsResponseTopicPartition()
			result.Partition = rp.Partition
			offset, timestamp, epoch, err := b.listOffset(req.Version, rt.Topic, rp)
			if err != nil {
				result.ErrorCode = protocol.CodeFor(err)
				anyError = true
			} else if req.Version == 0 {
				result.OldStyleOffsets = []int64{offset}
			} else {
				result.Offset, result.Timestamp, result.LeaderEpoch = offset, timestamp, epoch
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

func (b *Broker) listOffset(version int16, topic string, rp kmsg.ListOffsetsRequestTopicPartition) (offset, timestamp int64, epoch int32, err error) {
	p, err := b.registry.partition(topic, rp.Partition)
	if err != nil {
		return 0, 0, 0, err
	}
	epoch = p.state.Load().leaderEpoch
	if version >= 4 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch != epoch {
		if rp.CurrentLeaderEpoch > epoch {
			return 0, 0, 0, protocol.UnknownLeaderEpoch
		}
		return 0, 0, 0, protocol.FencedLeaderEpoch
	}
	switch rp.Timestamp {
	case listLatest:
		return p.log.LogEndOffset(), -1, epoch, nil
	case listEarliest:
		return p.log.LogStartOffset(), -1, epoch, nil
	case listMaxTimestamp:
		return -1, -1, epoch, nil
	}
	found, batchTimestamp, ok, err := p.log.OffsetForTimestamp(rp.Timestamp)
	if err != nil {
		return 0, 0, 0, appendErrorCode(err)
	}
	if !ok {
		return -1, -1, epoch, nil
	}
	return found, batchTimestamp, epoch, nil
}
