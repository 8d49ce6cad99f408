package broker

// DescribeProducers v0 (KIP-664): the idempotent producers each partition led here remembers
// (producer_state.go), with their epoch and last sequence, ordered by producer id. The state is
// rebuilt from the log's tail first if no produce has done so since the partition opened, so the
// answer after a restart matches what the sequence checks will use. A producer with a transaction
// open on the partition reports its first offset (partition_txn.go; -1 without one), also when
// only its transaction is known (its sequence then reads -1, as for a producer a marker made
// known). Not recorded, so answered with their "unknown" values: the last batch's timestamp (-1)
// and the transaction coordinator epoch (-1). Per partition:
// unknown UNKNOWN_TOPIC_OR_PARTITION, led elsewhere NOT_LEADER_OR_FOLLOWER, offline
// KAFKA_STORAGE_ERROR.

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

// activeProducer is what a partition reports of one producer.
type activeProducer struct {
	producerID     int64
	epoch          int16
	lastSequence   int32
	txnStartOffset int64 // -1: no transaction open
}

// activeProducers lists the producers s remembers, by id, with their open transactions (open:
// producer id -> first offset).
func (s *producerStates) activeProducers(log *segment.Log, open map[int64]int64) []activeProducer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked(log)
	out := make([]activeProducer, 0, len(s.mu.byID))
	for id, tracked := range s.mu.byID {
		active := activeProducer{producerID: id, epoch: tracked.entry.epoch, lastSequence: -1, txnStartOffset: -1}
		if tracked.entry.count > 0 {
			active.lastSequence = tracked.entry.last().lastSequence
		}
		if first, ok := open[id]; ok {
			active.txnStartOffset = first
		}
		out = append(out, active)
	}
	for id, first := range open {
		if _, known := s.mu.byID[id]; !known {
			out = append(out, activeProducer{producerID: id, epoch: -1, lastSequence: -1, txnStartOffset: first})
		}
	}
	slices.SortFunc(out, func(a, b activeProducer) int { return cmp.Compare(a.producerID, b.producerID) })
	return out
}

func (b *Broker) handleDescribeProducers(r *request, req *kmsg.DescribeProducersRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	anyError := false
	for _, rt := range req.Topics {
		topic := kmsg.NewDescribeProducersResponseTopic()
		topic.Topic = rt.Topic
		for _, index := range rt.Partitions {
			result := kmsg.NewDescribeProducersResponseTopicPartition()
			result.Partition = index
			p, err := b.registry.partition(rt.Topic, index)
			if err != nil {
				result.ErrorCode, result.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
				anyError = true
				topic.Partitions = append(topic.Partitions, result)
				continue
			}
			if _, err := p.lastStableOffset(); err != nil { // loads the open transactions
				result.ErrorCode = protocol.KafkaStorageError.Code
				anyError = true
				topic.Partitions = append(topic.Partitions, result)
				continue
			}
			result.ActiveProducers = []kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
			for _, producer := range p.producers.activeProducers(p.log, p.openTransactions()) {
				active := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				active.ProducerID, active.ProducerEpoch = producer.producerID, int32(producer.epoch)
				active.LastSequence = producer.lastSequence
				active.CoordinatorEpoch = -1
				active.CurrentTxnStartOffset = producer.txnStartOffset
				result.ActiveProducers = append(result.ActiveProducers, active)
			}
			topic.Partitions = append(topic.Partitions, result)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}
