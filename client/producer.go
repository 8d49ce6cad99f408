package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
)

// Producer batches records per partition and sends them to partition leaders. It is safe for
// concurrent use. See the package documentation for its guarantees.
type Producer struct {
	client   *Client
	cfg      producerConfig
	buffered *bufferAccount
	// unsubscribe ends the metadata refresh wake-ups (Close).
	unsubscribe func()
	encoder     *zstd.Encoder // nil unless compressing with zstd

	topics sync.Map // topic name -> *producerTopic

	// Produce holds closeGate for reading while it admits a record; Close takes it for writing, so
	// after Close has it no record can be added.
	closeGate sync.RWMutex
	closed    bool          // guarded by closeGate
	closing   chan struct{} // closed when Close starts: wakes Produce calls blocked on the buffer
	closeOnce sync.Once

	flushing atomic.Int32 // > 0: open batches are sent without waiting for linger
	wake     chan struct{}
	stop     chan struct{} // stops the sender
	workers  sync.WaitGroup

	inFlight struct {
		sync.Mutex
		perBroker map[int32]int
	}

	// producerID and producerEpoch are -1 without idempotence. Written by NewProducer only.
	producerID    int64
	producerEpoch int16
	// txn is the transaction state of a transactional producer (txn_producer.go), nil otherwise.
	txn *txnState
}

// NewProducer returns a producer sending through c. With IdempotenceAuto or IdempotenceRequired it
// asks a broker for a producer id first, which needs ctx.
func NewProducer(ctx context.Context, c *Client, opts ...ProducerOption) (*Producer, error) {
	cfg := defaultProducerConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	var errs []error
	if cfg.acks != AcksNone && cfg.acks != AcksLeader && cfg.acks != AcksAll {
		errs = append(errs, fmt.Errorf("acks %d is not 0, 1 or -1", cfg.acks))
	}
	if cfg.compression != CompressionNone && cfg.compression != CompressionZstd {
		errs = append(errs, fmt.Errorf("compression %d is not none or zstd", cfg.compression))
	}
	if cfg.batchMaxBytes < batch.HeaderSize+16 || cfg.maxBufferedBytes <= 0 || cfg.maxInFlightPerBroker <= 0 {
		errs = append(errs, errors.New("batch max bytes, max buffered bytes and max in flight must be positive"))
	}
	if cfg.linger < 0 || cfg.retryBackoff < 0 || cfg.maxRetryBackoff < cfg.retryBackoff || cfg.deliveryTimeout <= 0 || cfg.maxRetries < 0 {
		errs = append(errs, errors.New("linger, backoffs, retries and delivery timeout must be sensible (max backoff >= first)"))
	}
	if cfg.partitioner == nil {
		errs = append(errs, errors.New("nil partitioner"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("client: invalid producer options: %w", err)
	}
	p := &Producer{
		client:        c,
		cfg:           cfg,
		buffered:      newBufferAccount(cfg.maxBufferedBytes),
		closing:       make(chan struct{}),
		wake:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		producerID:    -1,
		producerEpoch: -1,
	}
	p.inFlight.perBroker = make(map[int32]int)
	if cfg.compression == CompressionZstd {
		encoder, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, fmt.Errorf("client: zstd encoder: %w", err)
		}
		p.encoder = encoder
	}
	if cfg.transactionalID != "" {
		if cfg.acks != AcksAll || cfg.idempotence == IdempotenceOff {
			return nil, errors.New("client: a transactional producer needs acks=all and idempotence")
		}
		if err := p.initTransactions(ctx); err != nil {
			return nil, err
		}
	} else if cfg.idempotence != IdempotenceOff && cfg.acks == AcksAll {
		if err := p.initProducerID(ctx); err != nil {
			return nil, err
		}
	} else if cfg.idempotence == IdempotenceRequired {
		return nil, errors.New("client: idempotence requires acks=all")
	}
	p.unsubscribe = c.metadata.subscribe(p.wakeSender)
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		p.runSender()
	}()
	return p, nil
}

// initProducerID asks for a producer id when the broker serves InitProducerId.
func (p *Producer) initProducerID(ctx context.Context) error {
	conn, err := p.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return fmt.Errorf("client: producer id: %w", err)
	}
	if !conn.supports(22) {
		if p.cfg.idempotence == IdempotenceRequired {
			return fmt.Errorf("%w: %s does not serve InitProducerId", ErrUnsupported, conn.address)
		}
		return nil
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60_000
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return fmt.Errorf("client: producer id: %w", err)
	}
	resp := raw.(*kmsg.InitProducerIDResponse)
	if err := errorForCode("init producer id", "", -1, resp.ErrorCode, nil); err != nil {
		if p.cfg.idempotence == IdempotenceRequired {
			return err
		}
		return nil
	}
	p.producerID, p.producerEpoch = resp.ProducerID, resp.ProducerEpoch
	return nil
}

// Idempotent reports whether the producer writes with a producer id (the broker deduplicates
// retried batches).
func (p *Producer) Idempotent() bool { return p.producerID >= 0 }

// Produce accepts r for sending and returns at once, unless the buffer is full: then it waits for
// room until ctx ends (or fails with ErrBufferFull under WithBufferFullError). ctx bounds only this
// wait (and a first metadata lookup for the topic), not the delivery.
//
// When Produce returns nil, callback (which may be nil) is called exactly once, with r (its
// Partition, Offset and Timestamp filled in) and the delivery error. Callbacks run on an internal
// goroutine, one after another for the records of one partition in offset order; they must not
// block. When Produce returns an error, the record was not accepted and callback is never called.
func (p *Producer) Produce(ctx context.Context, r *Record, callback func(*Record, error)) error {
	p.closeGate.RLock()
	defer p.closeGate.RUnlock()
	if p.closed {
		return ErrClosed
	}
	topic, err := p.topicFor(ctx, r.Topic)
	if err != nil {
		return err
	}
	if p.txn != nil {
		if err := p.addToTransaction(ctx, topic); err != nil {
			return err
		}
	}
	// A clock read is a measurable share of Produce: a record that brings its timestamp leaves
	// the reading to the batch it opens (newRecordBatch), if it opens one.
	var now time.Time
	if r.Timestamp.IsZero() {
		now = time.Now()
		r.Timestamp = now
	}
	if size, _ := recordSize(r, 0, 0); batch.HeaderSize+size+16 > p.cfg.batchMaxBytes {
		return fmt.Errorf("%w: %d bytes encoded, batches hold at most %d", ErrRecordTooLarge, size, p.cfg.batchMaxBytes)
	}
	partitions := len(topic.partitions)
	partition := p.cfg.partitioner.Partition(r, partitions)
	if partition != AnyPartition && (partition < 0 || partition >= partitions) {
		return fmt.Errorf("client: partitioner chose partition %d of %s, which has %d", partition, r.Topic, partitions)
	}
	charge := bufferedCharge(r)
	if err := p.buffered.acquire(ctx, charge, p.cfg.bufferFullError, p.closing); err != nil {
		return err
	}
	if callback == nil {
		callback = func(*Record, error) {}
	}
	r.Offset = -1
	var wake bool
	if partition == AnyPartition {
		wake = p.appendSticky(topic, r, callback, charge, now)
	} else {
		r.Partition = int32(partition)
		target := topic.partitions[partition]
		target.mu.Lock()
		wake = target.appendLocked(r, callback, charge, p.cfg.batchMaxBytes, now)
		target.mu.Unlock()
	}
	if wake {
		p.wakeSender()
	}
	return nil
}

// appendSticky adds a record to the topic's sticky partition, choosing a new one when the batch
// the previous keyless records filled has been closed.
func (p *Producer) appendSticky(topic *producerTopic, r *Record, callback func(*Record, error), charge int64, now time.Time) bool {
	topic.sticky.Lock()
	defer topic.sticky.Unlock()
	partitions := len(topic.partitions)
	chosen := topic.sticky.partition
	if chosen >= 0 {
		target := topic.partitions[chosen]
		target.mu.Lock()
		stillOpen := target.mu.open == topic.sticky.batch
		target.mu.Unlock()
		if !stillOpen {
			previous := chosen
			chosen = rand.IntN(partitions)
			if partitions > 1 && chosen == previous {
				chosen = (chosen + 1 + rand.IntN(partitions-1)) % partitions
			}
		}
	} else {
		chosen = rand.IntN(partitions)
	}
	r.Partition = int32(chosen)
	target := topic.partitions[chosen]
	target.mu.Lock()
	before := target.mu.open
	wake := target.appendLocked(r, callback, charge, p.cfg.batchMaxBytes, now)
	topic.sticky.partition, topic.sticky.batch = chosen, target.mu.open
	if before != nil && before != target.mu.open {
		// The record closed the batch keyless records were filling: the next one moves on.
		topic.sticky.batch = before
	}
	target.mu.Unlock()
	return wake
}

// ProduceSync produces r and waits for its acknowledgement. It returns ctx's error if ctx ends
// first; the record may still be delivered then.
func (p *Producer) ProduceSync(ctx context.Context, r *Record) error {
	done := make(chan error, 1)
	if err := p.Produce(ctx, r, func(_ *Record, err error) { done <- err }); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// topicFor returns the producer state of topic, looking the topic up on first use.
func (p *Producer) topicFor(ctx context.Context, name string) (*producerTopic, error) {
	if t, ok := p.topics.Load(name); ok {
		return t.(*producerTopic), nil
	}
	if name == "" {
		return nil, errors.New("client: record has no topic")
	}
	info, err := p.client.metadata.topic(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(info.partitions) == 0 {
		return nil, fmt.Errorf("%w %q: no partitions", ErrUnknownTopic, name)
	}
	p.client.metadata.use(name)
	t, _ := p.topics.LoadOrStore(name, newProducerTopic(name, len(info.partitions)))
	return t.(*producerTopic), nil
}

// Flush sends every buffered record without waiting for linger and waits until each has been
// reported to its callback, or ctx ends. Records produced during Flush are waited for too.
func (p *Producer) Flush(ctx context.Context) error {
	p.flushing.Add(1)
	defer p.flushing.Add(-1)
	p.wakeSender()
	return p.buffered.waitEmpty(ctx)
}

// BufferedRecords is the number of records accepted and not yet reported.
func (p *Producer) BufferedRecords() int64 { return p.buffered.recordsBuffered() }

// Close stops accepting records, flushes what is buffered until ctx ends, and then fails every
// record still undelivered with an error wrapping ErrClosed, calling its callback: no record is
// dropped without a report. A record whose request was in flight when ctx ended is reported as
// failed although the broker may have stored it. Close returns nil when everything was delivered.
// Callbacks have all run when Close returns.
func (p *Producer) Close(ctx context.Context) error {
	first := false
	p.closeOnce.Do(func() {
		first = true
		close(p.closing) // before taking closeGate: Produce calls waiting for room hold it shared
	})
	if !first {
		return ErrClosed
	}
	p.closeGate.Lock()
	p.closed = true
	p.closeGate.Unlock()

	flushErr := p.Flush(ctx)
	close(p.stop)
	p.unsubscribe()
	p.workers.Wait()
	undelivered := 0
	if flushErr != nil {
		undelivered = p.abandon(fmt.Errorf("%w before delivery: %w", ErrClosed, flushErr))
	}
	if p.encoder != nil {
		p.encoder.Close()
	}
	if undelivered > 0 {
		return fmt.Errorf("client: producer closed with %d records undelivered: %w", undelivered, flushErr)
	}
	return nil
}

// abandon fails every batch still held, in flight or not, and returns how many records it failed.
// It runs after the sender stopped; a response arriving later finds the batch finished.
func (p *Producer) abandon(cause error) int {
	failed := 0
	p.topics.Range(func(_, value any) bool {
		for _, partition := range value.(*producerTopic).partitions {
			partition.mu.Lock()
			var batches []*recordBatch
			if partition.mu.inFlight != nil {
				batches = append(batches, partition.mu.inFlight)
			}
			batches = append(batches, partition.mu.queued...)
			if partition.mu.open != nil {
				batches = append(batches, partition.mu.open)
			}
			partition.mu.queued, partition.mu.open = nil, nil
			partition.mu.Unlock()
			for _, b := range batches {
				if n := len(b.records); p.report(b, -1, cause) {
					failed += n
				}
			}
		}
		return true
	})
	return failed
}

func (p *Producer) wakeSender() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
