package broker

// Produce v3-v13 (record batch v2 only). Each partition's batches are validated (structure, CRC,
// record count) and appended with one write; the log assigns offsets. acks=0 gets no response,
// acks=1 is answered once the batches are in the page cache, acks=-1 once they are fdatasynced (group
// commit: many producers share one fsync). Refusals: acks outside {-1,0,1} INVALID_REQUIRED_ACKS; a
// batch above the topic's max.message.bytes MESSAGE_TOO_LARGE; bad CRC, magic other than 2 or broken
// structure CORRUPT_MESSAGE; record count disagreeing with the offset delta, or a control batch sent
// by a client, INVALID_RECORD; acks=-1 with fewer in-sync replicas than min.insync.replicas
// NOT_ENOUGH_REPLICAS; unknown partitions UNKNOWN_TOPIC_OR_PARTITION; a failed log
// KAFKA_STORAGE_ERROR; internal topics (__consumer_offsets) INVALID_TOPIC_EXCEPTION. Batches with a producer id follow the
// idempotence rules of producer_sequence.go: a fenced epoch INVALID_PRODUCER_EPOCH, a sequence gap
// OUT_OF_ORDER_SEQUENCE_NUMBER, a negative sequence INVALID_RECORD, and a duplicate of one of the
// producer's last five batches success with its original offset, appending nothing. Transactional
// batches open the producer's transaction on the partition (partition_txn.go); they are not checked
// against the coordinator's partition list (KIP-890 verification is not done). From v13 topics
// are named by id (KIP-516) and answered by id; an unknown id gets UNKNOWN_TOPIC_ID. v10 and v11 add
// response tags (current leader, node endpoints) that are never set.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/compaction"
	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

func (b *Broker) handleProduce(r *request, req *kmsg.ProduceRequest) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	refuse := func(code int16) {
		for _, rt := range req.Topics {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = rt.Topic, rt.TopicID
			counters := b.metrics.topics.topic(rt.Topic)
			for _, rp := range rt.Partitions {
				p := kmsg.NewProduceResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, code
				t.Partitions = append(t.Partitions, p)
				counters.failed("Produce", code)
			}
			resp.Topics = append(resp.Topics, t)
		}
		r.failed()
		if req.Acks == 0 {
			r.skip()
			return
		}
		r.respond(resp)
	}
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		refuse(protocol.InvalidRequiredAcks.Code)
		return
	}

	type pendingFlush struct {
		partition  *partition
		lastOffset int64
		minInsync  int
		result     *kmsg.ProduceResponseTopicPartition
		counters   *topicCounters
	}
	var flushes []pendingFlush
	anyError := false
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		var unknownID error
		if req.Version >= 13 {
			var known bool
			if rt.Topic, known = b.registry.topicName(rt.TopicID); !known {
				unknownID = fmt.Errorf("broker: no topic has id %x: %w", rt.TopicID, protocol.UnknownTopicID)
			}
		}
		counters := b.metrics.topics.topic(rt.Topic) // metrics_topics.go
		counters.produceRequests.Add(1)
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			result := &t.Partitions[i]
			*result = kmsg.NewProduceResponseTopicPartition()
			result.Partition = rp.Partition
			var p *partition
			var appended segment.AppendResult
			err := unknownID
			if err == nil {
				p, appended, err = b.produceToPartition(counters, rt.Topic, rp.Partition, rp.Records, req.Acks, req.TransactionID != nil)
			}
			if p != nil {
				result.LogStartOffset = p.log.LogStartOffset()
			}
			if err != nil {
				result.ErrorCode = protocol.CodeFor(err)
				if req.Version >= 8 {
					result.ErrorMessage = errorMessage(err)
				}
				anyError = true
				counters.failed("Produce", result.ErrorCode)
				continue
			}
			result.BaseOffset = appended.BaseOffset
			r.noteProduced(rt.Topic, rp.Partition, rp.Records) // request_trace.go
			if req.Acks == -1 {
				flushes = append(flushes, pendingFlush{partition: p, lastOffset: appended.LastOffset, minInsync: p.state.Load().minInsync, result: result, counters: counters})
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	r.markAppended() // request_timing.go
	if anyError {
		r.failed()
	}
	switch {
	case req.Acks == 0:
		r.skip()
	case len(flushes) == 0:
		r.respond(resp)
	default:
		// Respond when every partition's append is acknowledged by its in-sync replicas (durable on
		// each with the default ack mode: replication.Replica.AwaitAcks), or at the request timeout.
		var mu sync.Mutex
		remaining := len(flushes)
		answered := false
		acked := make([]bool, len(flushes))
		fsyncWatch := b.watchFsync(len(flushes)) // request_timing.go: times the fsync stage
		finish := func() {
			answered = true
			r.markAcked(fsyncWatch)
			r.respond(resp)
		}
		var timer *time.Timer
		if req.TimeoutMillis > 0 {
			timer = time.AfterFunc(time.Duration(req.TimeoutMillis)*time.Millisecond, func() {
				mu.Lock()
				defer mu.Unlock()
				if answered {
					return
				}
				for i, f := range flushes {
					if f.result.ErrorCode == 0 && !acked[i] {
						f.result.ErrorCode = protocol.RequestTimedOut.Code
						f.counters.failed("Produce", f.result.ErrorCode)
					}
				}
				r.failed()
				finish()
			})
		}
		for i, f := range flushes {
			if fsyncWatch != nil {
				f.partition.log.NotifyFlushed(f.lastOffset, fsyncWatch.flushed)
			}
			f.partition.replica.AwaitAcks(f.lastOffset, f.minInsync, func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if answered {
					return
				}
				acked[i] = true
				if err != nil {
					f.result.ErrorCode = protocol.CodeFor(err)
					if f.result.ErrorCode == protocol.UnknownServerError.Code {
						f.result.ErrorCode = protocol.KafkaStorageError.Code
					}
					f.counters.failed("Produce", f.result.ErrorCode)
					r.failed()
				}
				if remaining--; remaining == 0 {
					if timer != nil {
						timer.Stop()
					}
					finish()
				}
			})
		}
	}
}

// produceToPartition checks and appends one partition's batches; what it appends counts in
// counters too (the topic's, metrics_topics.go).
func (b *Broker) produceToPartition(counters *topicCounters, topic string, index int32, records []byte, acks int16, transactional bool) (*partition, segment.AppendResult, error) {
	if coordinator.IsInternalTopicName(topic) {
		// Kafka refuses client writes to internal topics this way; sluice's __consumer_offsets is
		// not even a log (offsets live in the Raft coordinator).
		return nil, segment.AppendResult{}, fmt.Errorf("broker: %s is internal: %w", topic, protocol.InvalidTopicException)
	}
	p, err := b.registry.partition(topic, index)
	if err != nil {
		return nil, segment.AppendResult{}, err
	}
	state := p.state.Load()
	if len(records) == 0 {
		return p, segment.AppendResult{}, fmt.Errorf("broker: produce to %s-%d without records: %w", topic, index, protocol.CorruptMessage)
	}
	var space [4]pendingBatch
	pending, err := scanBatches(records, func(h batch.Header) error {
		if h.Size() > int(state.maxMessageBytes) {
			return fmt.Errorf("broker: batch of %d bytes over max.message.bytes %d: %w", h.Size(), state.maxMessageBytes, protocol.MessageTooLarge)
		}
		if h.IsControl() {
			return fmt.Errorf("broker: clients may not send control batches: %w", protocol.InvalidRecord)
		}
		if err := batch.CheckProduced(h); err != nil {
			return fmt.Errorf("broker: %w: %w", protocol.InvalidRecord, err)
		}
		if transactional && (!h.IsTransactional() || h.ProducerID < 0) {
			return fmt.Errorf("broker: a transactional produce carries a batch outside any transaction: %w", protocol.InvalidRecord)
		}
		return nil
	}, space[:0])
	if err != nil {
		return p, segment.AppendResult{}, err
	}
	if state.compaction != nil {
		if err := compaction.RequireKeys(records); err != nil { // log_cleaner.go
			return p, segment.AppendResult{}, fmt.Errorf("broker: %s-%d is compacted: %w: %w", topic, index, protocol.InvalidRecord, err)
		}
	}
	if acks == -1 && state.minInsync > 1 {
		// The committed ISR, or fewer when followers stopped fetching and the controller cannot
		// shrink it yet (no Raft majority): see replication.Replica.InSyncCount.
		if inSync := min(state.isrSize, p.replica.InSyncCount(time.Now())); inSync < state.minInsync {
			return p, segment.AppendResult{}, fmt.Errorf("broker: %d in-sync replicas, min.insync.replicas %d: %w", inSync, state.minInsync, protocol.NotEnoughReplicas)
		}
	}
	// After the min.insync.replicas check: with its followers gone too, NOT_ENOUGH_REPLICAS says
	// more than "leadership may have moved" (session_lapse.go).
	if b.sessionLapsed(time.Now()) {
		return p, segment.AppendResult{}, errSessionLapsed(topic, index)
	}
	appended, duplicate, err := p.appendPending(records, pending)
	if refused := (protocol.ErrorCode{}); errors.As(err, &refused) {
		return p, appended, err // refused by the idempotence rules (producer_state.go)
	}
	if err != nil {
		return p, appended, fmt.Errorf("broker: append to %s-%d: %w", topic, index, appendErrorCode(err))
	}
	if duplicate {
		return p, appended, nil // answered with the original offsets; nothing appended
	}
	appendedRecords := appended.LastOffset - appended.BaseOffset + 1
	b.metrics.producedBytes.Add(len(records))
	b.metrics.producedRecords.Add(int(appendedRecords))
	counters.bytesIn.Add(uint64(len(records)))
	counters.recordsIn.Add(uint64(appendedRecords))
	p.appended()
	return p, appended, nil
}

func appendErrorCode(err error) error {
	switch {
	case errors.Is(err, batch.ErrInvalidRecord):
		return fmt.Errorf("%w: %w", protocol.InvalidRecord, err)
	case errors.Is(err, batch.ErrCorrupt), errors.Is(err, batch.ErrTruncated), errors.Is(err, batch.ErrUnsupportedMagic):
		return fmt.Errorf("%w: %w", protocol.CorruptMessage, err)
	case errors.Is(err, segment.ErrClosed):
		return fmt.Errorf("%w: %w", protocol.NotLeaderOrFollower, err)
	}
	return fmt.Errorf("%w: %w", protocol.KafkaStorageError, err)
}
