package broker

// TxnOffsetCommit v0-v5: offsets committed inside a transaction, sent to the group's coordinator.
// From v3 the member and generation are checked as for OffsetCommit (an empty member id with
// generation -1 skips the check). The offsets are staged in Raft by producer id; they become
// visible to OffsetFetch in the entry that decides the transaction's commit, and vanish if it
// aborts. Staging is refused unless the transaction is Ongoing at this producer id and epoch and
// added the group (AddOffsetsToTxn): another producer id INVALID_PRODUCER_ID_MAPPING, another epoch
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v3), group not added INVALID_TXN_STATE. Also: empty
// group INVALID_GROUP_ID; not the group's coordinator NOT_COORDINATOR; unknown partitions
// UNKNOWN_TOPIC_OR_PARTITION; metadata over 4096 bytes OFFSET_METADATA_TOO_LARGE. v6 (topic ids) is
// not served.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/txn"
)

func (b *Broker) handleTxnOffsetCommit(r *request, req *kmsg.TxnOffsetCommitRequest) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	setAll := func(code int16) {
		for i := range codes {
			for j := range codes[i] {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	if err := b.txnOffsetCommit(req, codes); err != nil {
		setAll(txnErrorCode(err, req.Version, 3))
	}
	failed := false
	for i, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
			failed = failed || rp.ErrorCode != 0
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if failed {
		r.failed()
	}
	r.respond(resp)
}

// txnOffsetCommit sets per-partition codes for what it refuses alone and returns the error that
// answers every other partition.
func (b *Broker) txnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, codes [][]int16) error {
	if req.Group == "" {
		return fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	if err := b.checkCoordinator(req.Group); err != nil {
		return err
	}
	if req.Version >= 3 && (req.MemberID != "" || req.Generation >= 0) {
		var answer error
		err := b.groups.with(req.Group, false, func(_ *groupEntry, g *group.Group, now time.Time) group.Outcome {
			answer = g.CheckCommit(now, req.MemberID, optionalString(req.InstanceID), req.Generation)
			return group.Outcome{}
		})
		if err != nil {
			answer = err
		}
		if answer != nil {
			return answer
		}
	}
	meta := b.coordinator.Metadata()
	nowMillis := time.Now().UnixMilli()
	stage := coordinator.StagedOffsets{TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}
	for i, t := range req.Topics {
		topic := meta.Topics[t.Topic]
		for j, p := range t.Partitions {
			switch {
			case topic == nil || p.Partition < 0 || int(p.Partition) >= len(topic.Partitions):
				codes[i][j] = protocol.UnknownTopicOrPartition.Code
				continue
			case p.Metadata != nil && len(*p.Metadata) > maxOffsetMetadataBytes:
				codes[i][j] = protocol.OffsetMetadataTooLarge.Code
				continue
			}
			epoch := int32(-1)
			if req.Version >= 2 {
				epoch = p.LeaderEpoch
			}
			stage.Commits = append(stage.Commits, coordinator.OffsetCommit{
				Group:          req.Group,
				TopicPartition: coordinator.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				CommittedOffset: coordinator.CommittedOffset{
					Offset: p.Offset, LeaderEpoch: epoch, Metadata: optionalString(p.Metadata), CommitTimeMillis: nowMillis,
				},
			})
		}
	}
	if len(stage.Commits) == 0 {
		return nil
	}
	result, err := b.txns.batcher.write(nil, &stage)
	if err != nil {
		return fmt.Errorf("broker: stage transactional offsets: %w: %w", protocol.CoordinatorNotAvailable, err)
	}
	if len(result.Refused) > 0 {
		// Say why, from the record as the refusing entry saw it (applied here by now).
		current, _ := b.txns.current(req.TransactionalID)
		if err := txn.CheckOffsetCommit(current, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); err != nil {
			return err
		}
		return fmt.Errorf("broker: transaction %q refused the offsets: %w", req.TransactionalID, protocol.InvalidTxnState)
	}
	return nil
}
