package broker

// ListOffsets v0-v7: latest (-1: the high watermark; with isolation level 1, read_committed, from v2
// the last stable offset),
// earliest (-2: the log start) and by timestamp (the first record whose timestamp reaches it, found
// through the time index and, inside a compressed batch, rounded down to the batch; -1 when none does). Max-timestamp lookups (-3, v7) are answered with offset -1, as for a topic without
// records, since the log does not yet track where its largest timestamp lies. v0 answers in the old
// style (a list holding one offset). Unknown partitions UNKNOWN_TOPIC_OR_PARTITION; a stale
// current_leader_epoch FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"

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
			offset, timestamp, epoch, err := b.listOffset(req.Version, req.IsolationLevel, rt.Topic, rp)
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

func (b *Broker) listOffset(version int16, isolationLevel int8, topic string, rp kmsg.ListOffsetsRequestTopicPartition) (offset, timestamp int64, epoch int32, err error) {
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
		if version >= 2 && isolationLevel == 1 {
			stable, err := b.fetchUpTo(p, isolationLevel, p.replica.HighWatermark())
			if err != nil {
				return 0, 0, 0, appendErrorCode(err)
			}
			return stable, -1, epoch, nil
		}
		return p.replica.HighWatermark(), -1, epoch, nil
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
	// Narrow the batch down to its first record at or after the timestamp, when its records are
	// readable without decompressing.
	raw, err := p.log.Read(found, 1, p.log.LogEndOffset(), nil)
	if err == nil {
		if offset, timestamp, ok := firstRecordAtOrAfter(raw, rp.Timestamp); ok {
			return offset, timestamp, epoch, nil
		}
	}
	return found, batchTimestamp, epoch, nil
}

// firstRecordAtOrAfter walks the records of an uncompressed batch for the first whose timestamp is
// at or after target. ok is false for compressed or malformed batches.
func firstRecordAtOrAfter(raw []byte, target int64) (offset, timestamp int64, ok bool) {
	h, err := batch.Validate(raw)
	if err != nil || h.Codec() != batch.CodecNone {
		return 0, 0, false
	}
	records := raw[batch.HeaderSize:h.Size()]
	for len(records) > 0 {
		length, n := binary.Varint(records)
		if n <= 0 || length < 0 || int64(len(records)-n) < length {
			return 0, 0, false
		}
		record := records[n : n+int(length)]
		records = records[n+int(length):]
		if len(record) < 1 {
			return 0, 0, false
		}
		timestampDelta, m := binary.Varint(record[1:])
		if m <= 0 {
			return 0, 0, false
		}
		offsetDelta, k := binary.Varint(record[1+m:])
		if k <= 0 {
			return 0, 0, false
		}
		timestamp := h.BaseTimestamp + timestampDelta
		if h.Attributes&batch.AttributeLogAppendTime != 0 {
			timestamp = h.MaxTimestamp
		}
		if timestamp >= target {
			return h.BaseOffset + offsetDelta, timestamp, true
		}
	}
	return 0, 0, false
}
