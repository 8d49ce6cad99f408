package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
)

// maxProduceRequestBytes stops adding batches to one produce request; the rest go in the next.
const maxProduceRequestBytes = 16 << 20

// timerLateness is how late Go's timers fire on an idle thread here: time.Sleep took 1.13 ms at the
// median for 5-500 µs and 2.25 ms (p99 2.57) for 2 ms; the runtime waits in epoll with millisecond
// timeouts.
const timerLateness = time.Millisecond

// lingerSlack is how much before its linger an open batch may go: the sender wakes that much early,
// so the timer's lateness centres the send on the linger instead of adding to it, and open batches
// of other partitions due within it join the same request. It is half the linger at most, so a
// short linger still batches.
func lingerSlack(linger time.Duration) time.Duration { return min(timerLateness, linger/2) }

// produceRequest is the batches bound for one broker in one request.
type produceRequest struct {
	leader  int32
	batches []*recordBatch
	bytes   int
}

// runSender is the producer's sending loop. Each pass takes the batches that may go (closed, or
// open past linger, or flushing), one per partition with nothing in flight, groups them by leader
// and sends one request per leader within the in-flight bound. It wakes on new batches, answers,
// metadata refreshes and the earliest linger or backoff deadline.
func (p *Producer) runSender() {
	runPasses(p.stop, p.wake, p.sendReady)
}

// sendReady sends what may go now and returns the earliest time something else may (zero: none).
func (p *Producer) sendReady(now time.Time) (next time.Time) {
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	flushing := p.flushing.Load() > 0
	requests := map[int32]*produceRequest{}
	var expired []*recordBatch
	needMetadata := false

	p.topics.Range(func(key, value any) bool {
		topic := value.(*producerTopic)
		info := p.client.metadata.cached(topic.name)
		for _, partition := range topic.partitions {
			leader := int32(-1)
			if info != nil && int(partition.id) < len(info.partitions) {
				leader = info.partitions[partition.id].leader
			}
			partition.mu.Lock()
			if partition.mu.inFlight != nil {
				partition.mu.Unlock()
				continue
			}
			expired = partition.expireLocked(now, p.cfg.deliveryTimeout, expired)
			var candidate *recordBatch
			fromQueue := false
			switch {
			case now.Before(partition.mu.retryAt):
				soonest(partition.mu.retryAt)
			case len(partition.mu.queued) > 0:
				candidate, fromQueue = partition.mu.queued[0], true
			case partition.mu.open != nil:
				if due := partition.mu.open.createdAt.Add(p.cfg.linger - lingerSlack(p.cfg.linger)); flushing || !now.Before(due) {
					candidate = partition.mu.open
				} else {
					soonest(due)
				}
			}
			if candidate == nil {
				partition.mu.Unlock()
				continue
			}
			if leader < 0 {
				partition.mu.Unlock()
				needMetadata = true
				soonest(now.Add(100 * time.Millisecond))
				continue
			}
			request := requests[leader]
			if request == nil {
				if !p.reserveInFlight(leader) {
					partition.mu.Unlock()
					continue // an answer from this broker wakes us
				}
				request = &produceRequest{leader: leader}
				requests[leader] = request
			}
			if len(request.batches) > 0 && request.bytes+len(candidate.encoded) > maxProduceRequestBytes {
				partition.mu.Unlock()
				soonest(now)
				continue
			}
			if fromQueue {
				partition.mu.queued[0] = nil
				partition.mu.queued = partition.mu.queued[1:]
			} else {
				partition.mu.open = nil
			}
			partition.mu.inFlight = candidate
			if candidate.wire == nil && p.producerID >= 0 {
				candidate.producerID, candidate.producerEpoch = p.producerID, p.producerEpoch
				candidate.baseSequence = partition.mu.nextSequence
				partition.mu.nextSequence = sequenceAfter(candidate.baseSequence, len(candidate.records))
			}
			partition.mu.Unlock()
			request.batches = append(request.batches, candidate)
			request.bytes += len(candidate.encoded)
		}
		return true
	})

	for _, b := range expired {
		p.finish(b, -1, fmt.Errorf("%w: %s-%d: %d records not delivered within %v",
			ErrDeliveryTimeout, b.partition.topic, b.partition.id, len(b.records), p.cfg.deliveryTimeout))
	}
	if needMetadata {
		p.client.metadata.requestRefresh()
	}
	for _, request := range requests {
		p.dispatch(request)
	}
	return next
}

// expireLocked moves the batches of a partition with nothing in flight that are past the delivery
// timeout onto expired (oldest first, so order of reports is kept).
func (pp *producerPartition) expireLocked(now time.Time, timeout time.Duration, expired []*recordBatch) []*recordBatch {
	for len(pp.mu.queued) > 0 && now.Sub(pp.mu.queued[0].createdAt) > timeout {
		expired = append(expired, pp.mu.queued[0])
		pp.mu.queued[0] = nil
		pp.mu.queued = pp.mu.queued[1:]
	}
	if len(pp.mu.queued) == 0 && pp.mu.open != nil && now.Sub(pp.mu.open.createdAt) > timeout {
		expired = append(expired, pp.mu.open)
		pp.mu.open = nil
	}
	return expired
}

// reserveInFlight takes one in-flight slot for leader, if one is free.
func (p *Producer) reserveInFlight(leader int32) bool {
	p.inFlight.Lock()
	defer p.inFlight.Unlock()
	if p.inFlight.perBroker[leader] >= p.cfg.maxInFlightPerBroker {
		return false
	}
	p.inFlight.perBroker[leader]++
	return true
}

func (p *Producer) releaseInFlight(leader int32) {
	p.inFlight.Lock()
	p.inFlight.perBroker[leader]--
	p.inFlight.Unlock()
}

// dispatch encodes and sends one request. Sending on an open connection happens here; a connection
// that must be dialled first is dialled on its own goroutine so the sender loop never waits on it.
func (p *Producer) dispatch(request *produceRequest) {
	req := kmsg.NewPtrProduceRequest()
	if p.txn != nil {
		req.TransactionID = &p.cfg.transactionalID
	}
	req.Acks = int16(p.cfg.acks)
	req.TimeoutMillis = int32(p.cfg.ackTimeout / time.Millisecond)
	topicIndex := map[string]int{}
	for _, b := range request.batches {
		if b.wire == nil {
			b.wire = p.encodeBatch(b)
		}
		index, ok := topicIndex[b.partition.topic]
		if !ok {
			index = len(req.Topics)
			topicIndex[b.partition.topic] = index
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = b.partition.topic
			req.Topics = append(req.Topics, topic)
		}
		partition := kmsg.NewProduceRequestTopicPartition()
		partition.Partition = b.partition.id
		partition.Records = b.wire
		req.Topics[index].Partitions = append(req.Topics[index].Partitions, partition)
	}
	expectResponse := p.cfg.acks != AcksNone
	done := func(resp kmsg.Response, err error) { p.handleProduceResult(request, resp, err) }
	if conn := p.client.pool.existing(request.leader, roleProduce); conn != nil {
		conn.send(req, p.cfg.ackTimeout, expectResponse, done)
		return
	}
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		ctx, cancel := context.WithTimeout(context.Background(), p.client.cfg.dialTimeout)
		defer cancel()
		conn, err := p.client.pool.conn(ctx, request.leader, roleProduce)
		if err != nil {
			done(nil, err)
			return
		}
		conn.send(req, p.cfg.ackTimeout, expectResponse, done)
	}()
}

// encodeBatch writes the batch header (and compresses the records when asked) and returns the
// batch as sent.
func (p *Producer) encodeBatch(b *recordBatch) []byte {
	wire := b.encoded
	attributes := uint16(0)
	if p.txn != nil {
		attributes |= batch.AttributeTransactional
	}
	if p.encoder != nil {
		compressed := make([]byte, batch.HeaderSize, batch.HeaderSize+len(b.encoded)/2)
		compressed = p.encoder.EncodeAll(b.encoded[batch.HeaderSize:], compressed)
		wire = compressed
		attributes |= uint16(p.cfg.compression)
	}
	count := uint32(len(b.records))
	binary.BigEndian.PutUint64(wire[0:], 0)                                    // base offset: the broker assigns
	binary.BigEndian.PutUint32(wire[8:], uint32(len(wire)-batch.LengthPrefix)) // batch length
	binary.BigEndian.PutUint32(wire[12:], 0xFFFFFFFF)                          // partition leader epoch: -1
	wire[16] = 2                                                               // magic
	binary.BigEndian.PutUint16(wire[21:], attributes)
	binary.BigEndian.PutUint32(wire[23:], count-1) // last offset delta
	binary.BigEndian.PutUint64(wire[27:], uint64(b.baseTimestamp))
	binary.BigEndian.PutUint64(wire[35:], uint64(b.maxTimestamp))
	binary.BigEndian.PutUint64(wire[43:], uint64(b.producerID))
	binary.BigEndian.PutUint16(wire[51:], uint16(b.producerEpoch))
	binary.BigEndian.PutUint32(wire[53:], uint32(b.baseSequence))
	binary.BigEndian.PutUint32(wire[57:], count)
	batch.SetCRC(wire)
	return wire
}

// handleProduceResult settles every batch of a request from its answer (or failure).
func (p *Producer) handleProduceResult(request *produceRequest, raw kmsg.Response, err error) {
	p.releaseInFlight(request.leader)
	defer p.wakeSender()
	if err != nil {
		p.client.metadata.requestRefresh()
		for _, b := range request.batches {
			p.retryOrFail(b, err)
		}
		return
	}
	if raw == nil { // acks=0: written is all we learn
		for _, b := range request.batches {
			p.finish(b, -1, nil)
		}
		return
	}
	resp := raw.(*kmsg.ProduceResponse)
	type result struct {
		code       int16
		baseOffset int64
		message    *string
	}
	results := make(map[TopicPartition]result, len(request.batches))
	for _, t := range resp.Topics {
		for _, part := range t.Partitions {
			results[TopicPartition{t.Topic, part.Partition}] = result{part.ErrorCode, part.BaseOffset, part.ErrorMessage}
		}
	}
	refresh := false
	for _, b := range request.batches {
		r, ok := results[TopicPartition{b.partition.topic, b.partition.id}]
		switch {
		case !ok:
			p.retryOrFail(b, fmt.Errorf("%w: produce response lacks %s-%d", ErrMalformed, b.partition.topic, b.partition.id))
		case r.code == 0:
			p.finish(b, r.baseOffset, nil)
		case r.code == protocol.DuplicateSequenceNumber.Code:
			p.finish(b, -1, nil) // the broker has this batch from an earlier attempt
		default:
			kafkaErr := newKafkaError("produce", b.partition.topic, b.partition.id, r.code, r.message)
			if kafkaErr.Retriable {
				refresh = true
				p.retryOrFail(b, kafkaErr)
			} else {
				p.rewindSequence(b)
				p.finish(b, -1, kafkaErr)
			}
		}
	}
	if refresh {
		p.client.metadata.requestRefresh()
	}
}

// sequenceAfter is the sequence that follows a batch of records starting at base: sequences wrap
// from MaxInt32 to 0, as Kafka's do.
func sequenceAfter(base int32, records int) int32 {
	return int32((int64(base) + int64(records)) % (1 << 31))
}

// rewindSequence hands b's sequence numbers back to its partition after the broker refused b
// outright (a non-retriable error code: nothing of b was stored), so that the next batch starts where
// b began instead of leaving a gap the broker would refuse as out of order for the rest of the
// producer's life. With at most one batch in flight per partition, no later batch holds a sequence
// yet. Outcomes that stay unknown (delivery timeout, retries exhausted on network errors) are not
// rewound: the broker may have stored b, and reusing its sequences could make a new batch look like
// a duplicate of it.
func (p *Producer) rewindSequence(b *recordBatch) {
	if b.producerID < 0 {
		return
	}
	partition := b.partition
	partition.mu.Lock()
	if partition.mu.nextSequence == sequenceAfter(b.baseSequence, len(b.records)) {
		partition.mu.nextSequence = b.baseSequence
	}
	partition.mu.Unlock()
}

// retryOrFail puts b back at the front of its partition's queue after a backoff, or fails it when
// retries or the delivery timeout are used up.
func (p *Producer) retryOrFail(b *recordBatch, cause error) {
	b.attempts++
	switch {
	case b.attempts > p.cfg.maxRetries:
		p.finish(b, -1, fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, b.attempts, cause))
		return
	case time.Since(b.createdAt) > p.cfg.deliveryTimeout:
		p.finish(b, -1, fmt.Errorf("%w: %w", ErrDeliveryTimeout, cause))
		return
	}
	backoff := p.cfg.retryBackoff << min(b.attempts-1, 20)
	if backoff > p.cfg.maxRetryBackoff || backoff <= 0 {
		backoff = p.cfg.maxRetryBackoff
	}
	partition := b.partition
	partition.mu.Lock()
	if partition.mu.inFlight != b || b.finished.Load() {
		partition.mu.Unlock()
		return // abandoned by Close meanwhile
	}
	partition.mu.inFlight = nil
	partition.mu.queued = append([]*recordBatch{b}, partition.mu.queued...)
	partition.mu.retryAt = time.Now().Add(backoff)
	partition.mu.Unlock()
}

// finish reports b (see report) and recycles it. Only the owner of the batch's outcome may call
// it: the answer to its request, or the sender for a batch never sent.
func (p *Producer) finish(b *recordBatch, baseOffset int64, err error) {
	if p.report(b, baseOffset, err) {
		b.recycle()
	}
}

// report reports every record of b (offsets from baseOffset when non-negative), frees its
// partition for the next batch and its buffer space, and reports whether this call did it (false
// if b was already finished). It does not recycle b: an abandoned batch may still be answered.
func (p *Producer) report(b *recordBatch, baseOffset int64, err error) bool {
	if !b.finished.CompareAndSwap(false, true) {
		return false
	}
	if err != nil && p.txn != nil {
		p.txn.noteFailure(err)
	}
	for i := range b.records {
		record := b.records[i].record
		if err == nil && baseOffset >= 0 {
			record.Offset = baseOffset + int64(i)
		}
		b.records[i].callback(record, err)
	}
	partition := b.partition
	partition.mu.Lock()
	if partition.mu.inFlight == b {
		partition.mu.inFlight = nil
	}
	partition.mu.Unlock()
	p.buffered.release(b.bufferedBytes, int64(len(b.records)))
	return true
}
