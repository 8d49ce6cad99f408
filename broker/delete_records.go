package broker

// DeleteRecords v0-2: moves a partition's log start offset forward (segment.Log.AdvanceLogStart):
// reads below it get OFFSET_OUT_OF_RANGE, ListOffsets earliest answers it, and whole segments below
// it are deleted at once. An offset of -1 means the high watermark. The answer carries the new log
// start (the low watermark). Followers move theirs when their leader's fetch answers report it.
// Refusals: an offset above the high watermark or below -1 OFFSET_OUT_OF_RANGE; a topic whose
// cleanup.policy lacks "delete" (compacted only) POLICY_VIOLATION, as Kafka; unknown partitions
// UNKNOWN_TOPIC_OR_PARTITION; partitions this broker does not lead NOT_LEADER_OR_FOLLOWER.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

func (b *Broker) handleDeleteRecords(r *request, req *kmsg.DeleteRecordsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	failed := false
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			result := kmsg.NewDeleteRecordsResponseTopicPartition()
			result.Partition = rp.Partition
			start, err := b.deleteRecords(rt.Topic, rp.Partition, rp.Offset)
			result.LowWatermark, result.ErrorCode = start, protocol.CodeFor(err)
			if err != nil {
				result.LowWatermark = -1
				failed = true
				b.logger.Debug("delete records refused", "topic", rt.Topic, "partition", rp.Partition, "offset", rp.Offset, "err", err)
			}
			t.Partitions = append(t.Partitions, result)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if failed {
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) deleteRecords(topic string, index int32, offset int64) (int64, error) {
	p, err := b.registry.partition(topic, index)
	if err != nil {
		return 0, err
	}
	if t, ok := b.registry.snapshot()[topic]; ok && !coordinator.CleanupPolicyHas(policyOf(t.meta.Configs), "delete") {
		return 0, fmt.Errorf("broker: %s has cleanup.policy=%s: records are deleted only under \"delete\": %w",
			topic, t.meta.Configs[coordinator.ConfigCleanupPolicy], protocol.PolicyViolation)
	}
	high := p.replica.HighWatermark()
	if offset == -1 {
		offset = high
	}
	if offset < 0 || offset > high {
		return 0, fmt.Errorf("broker: delete records of %s-%d before %d: outside [0, high watermark %d]: %w", topic, index, offset, high, protocol.OffsetOutOfRange)
	}
	start, err := p.log.AdvanceLogStart(offset)
	switch {
	case errors.Is(err, segment.ErrOffsetOutOfRange):
		return 0, fmt.Errorf("broker: %w: %w", protocol.OffsetOutOfRange, err)
	case err != nil:
		return 0, appendErrorCode(err)
	}
	b.logger.Info("records deleted", "topic", topic, "partition", index, "log_start", start)
	return start, nil
}

// policyOf returns a topic's cleanup.policy, "delete" when it has no override.
func policyOf(configs map[string]string) string {
	if policy, ok := configs[coordinator.ConfigCleanupPolicy]; ok {
		return policy
	}
	return "delete"
}
