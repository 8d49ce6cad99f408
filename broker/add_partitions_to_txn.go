package broker

// AddPartitionsToTxn v0-v5. v0-v3 (clients): add partitions to the producer's transaction (it
// becomes Ongoing), persisted before the answer, so a marker will reach them whatever happens to
// this coordinator. v4-v5 (KIP-890, brokers) carry many transactions; with VerifyOnly the
// partitions are only checked to be in the Ongoing transaction (INVALID_TXN_STATE otherwise),
// nothing is added. Refusals, for every partition of the transaction: unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION (the others OPERATION_NOT_ATTEMPTED); not this broker's id
// NOT_COORDINATOR; another producer id INVALID_PRODUCER_ID_MAPPING; another epoch PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2, for old clients); a transaction being completed
// CONCURRENT_TRANSACTIONS.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/txn"
)

func (b *Broker) handleAddPartitionsToTxn(r *request, req *kmsg.AddPartitionsToTxnRequest) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	failed := false
	if req.Version <= 3 {
		topics := make([]kmsg.AddPartitionsToTxnRequestTransactionTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			topics = append(topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		codes := b.addPartitionsToTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics, req.Version)
		for i, t := range topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for j, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i][j]
				failed = failed || rp.ErrorCode != 0
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	} else {
		for _, tx := range req.Transactions {
			codes := b.addPartitionsToTxn(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly, tx.Topics, req.Version)
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = tx.TransactionalID
			for i, t := range tx.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				for j, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p, codes[i][j]
					failed = failed || rp.ErrorCode != 0
					rt.Partitions = append(rt.Partitions, rp)
				}
				rtx.Topics = append(rtx.Topics, rt)
			}
			resp.Transactions = append(resp.Transactions, rtx)
		}
	}
	if failed {
		r.failed()
	}
	r.respond(resp)
}

// addPartitionsToTxn answers one transaction: codes[i][j] for topics[i].Partitions[j].
func (b *Broker) addPartitionsToTxn(id string, producerID int64, epoch int16, verifyOnly bool, topics []kmsg.AddPartitionsToTxnRequestTransactionTopic, version int16) [][]int16 {
	codes := make([][]int16, len(topics))
	all := func(code int16) [][]int16 {
		for i, t := range topics {
			codes[i] = make([]int16, len(t.Partitions))
			for j := range codes[i] {
				codes[i][j] = code
			}
		}
		return codes
	}
	// Unknown partitions fail the whole request, as in Kafka.
	meta := b.coordinator.Metadata()
	var partitions []txn.Partition
	unknown := false
	for _, t := range topics {
		topic := meta.Topics[t.Topic]
		for _, p := range t.Partitions {
			if topic == nil || p < 0 || int(p) >= len(topic.Partitions) {
				unknown = true
			}
			partitions = append(partitions, txn.Partition{Topic: t.Topic, Partition: p})
		}
	}
	if unknown {
		all(protocol.OperationNotAttempted.Code)
		for i, t := range topics {
			topic := meta.Topics[t.Topic]
			for j, p := range t.Partitions {
				if topic == nil || p < 0 || int(p) >= len(topic.Partitions) {
					codes[i][j] = protocol.UnknownTopicOrPartition.Code
				}
			}
		}
		return codes
	}
	return all(txnErrorCode(b.addPartitions(id, producerID, epoch, verifyOnly, partitions), version, 2))
}

func (b *Broker) addPartitions(id string, producerID int64, epoch int16, verifyOnly bool, partitions []txn.Partition) error {
	c := b.txns
	if err := c.checkOwner(id); err != nil {
		return err
	}
	unlock := c.lock(id)
	defer unlock()
	current, version := c.current(id)
	if verifyOnly {
		if current == nil || current.ProducerID != producerID || current.ProducerEpoch != epoch || current.State != txn.Ongoing {
			return protocol.InvalidTxnState
		}
		for _, p := range partitions {
			if !current.HasPartition(p) {
				return protocol.InvalidTxnState
			}
		}
		return nil
	}
	next, changed, err := txn.AddPartitions(current, id, producerID, epoch, partitions, time.Now().UnixMilli())
	if err != nil || !changed {
		return err
	}
	_, err = c.store(next, version)
	return err
}

// txnErrorCode is the code for a transaction error, with PRODUCER_FENCED answered as
// INVALID_PRODUCER_EPOCH to request versions below fencedSince (clients that predate it).
func txnErrorCode(err error, version, fencedSince int16) int16 {
	if errors.Is(err, protocol.ProducerFenced) && version < fencedSince {
		return protocol.InvalidProducerEpoch.Code
	}
	return protocol.CodeFor(err)
}
