package client

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// pendingRecord is a record accepted by Produce and not yet reported.
type pendingRecord struct {
	record   *Record
	callback func(*Record, error)
}

// recordBatch accumulates the records of one partition into one Kafka record batch. Records are
// encoded as they arrive, behind room reserved for the 61-byte header, so that closing the batch
// writes only the header (and compresses, when asked).
//
// Invariant: records[i] is encoded with offset delta i; len(records) == number of encoded records.
type recordBatch struct {
	partition     *producerPartition
	encoded       []byte // batch.HeaderSize reserved bytes, then the records
	records       []pendingRecord
	baseTimestamp int64 // milliseconds, of the first record
	maxTimestamp  int64
	createdAt     time.Time
	bufferedBytes int64 // charged to the producer's buffer, released when the batch is reported

	// Set when the batch is first sent and kept for retries, so that a retry is the same batch
	// (same sequence numbers) the broker may already have.
	wire          []byte
	baseSequence  int32
	producerID    int64
	producerEpoch int16
	attempts      int

	// finished is set by whoever reports the batch (response, failure, abandonment), exactly once.
	finished atomic.Bool
}

// recordSize is the encoded size of r at the given deltas, and the record body length.
func recordSize(r *Record, offsetDelta int, timestampDelta int64) (total, body int) {
	body = 1 + varintLen(timestampDelta) + varintLen(int64(offsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		body += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return varintLen(int64(body)) + body, body
}

// appendRecord encodes r (record format of batch v2) onto dst.
func appendRecord(dst []byte, r *Record, bodyLength, offsetDelta int, timestampDelta int64) []byte {
	dst = binary.AppendVarint(dst, int64(bodyLength))
	dst = append(dst, 0) // attributes, unused
	dst = binary.AppendVarint(dst, timestampDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendVarBytes(dst, r.Key)
	dst = appendVarBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendVarBytes(dst, h.Value)
	}
	return dst
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63) // zigzag
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1 // varint -1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// bufferedCharge is what a record costs against the producer's buffer bound: its encoded size
// with a generous allowance for the varints.
func bufferedCharge(r *Record) int64 {
	size := len(r.Key) + len(r.Value) + 24
	for _, h := range r.Headers {
		size += len(h.Key) + len(h.Value) + 10
	}
	return int64(size)
}

var batchPool = sync.Pool{New: func() any { return new(recordBatch) }}

// newRecordBatch opens a batch at now, or at the clock's reading when now is zero.
func newRecordBatch(p *producerPartition, firstTimestamp int64, now time.Time) *recordBatch {
	b := batchPool.Get().(*recordBatch)
	b.partition = p
	b.encoded = append(b.encoded[:0], make([]byte, batch.HeaderSize)...)
	b.records = b.records[:0]
	b.baseTimestamp, b.maxTimestamp = firstTimestamp, firstTimestamp
	if now.IsZero() {
		now = time.Now()
	}
	b.createdAt = now // when the linger starts
	b.bufferedBytes = 0
	b.wire = nil
	b.baseSequence, b.producerID, b.producerEpoch = -1, -1, -1
	b.attempts = 0
	b.finished.Store(false)
	return b
}

// recycle returns b to the pool once nothing refers to it.
func (b *recordBatch) recycle() {
	if cap(b.encoded) > 4<<20 {
		b.encoded = nil
	}
	clear(b.records)
	b.records = b.records[:0]
	b.partition = nil
	b.wire = nil
	batchPool.Put(b)
}

// producerPartition is the producer's state for one partition: the batch being filled, the closed
// batches waiting, and the batch in flight.
//
// Invariant: at most one batch per partition is in flight, and queued batches go out in order
// after it; a retried batch goes back to the front of the queue. This is what keeps a partition's
// records in order across retries.
type producerPartition struct {
	topic string
	id    int32

	mu struct {
		sync.Mutex
		open         *recordBatch   // being filled; nil when none
		queued       []*recordBatch // closed, waiting to be sent, oldest first
		inFlight     *recordBatch   // sent and not yet answered
		retryAt      time.Time      // no send before this (backoff after an error)
		nextSequence int32          // idempotence: sequence of the next batch's first record
	}
}

// appendLocked adds r to the open batch, closing the batch first if r would overflow it. It
// reports whether the sender should look at this partition (a new batch started or one closed).
func (p *producerPartition) appendLocked(r *Record, callback func(*Record, error), charge int64, maxBytes int, now time.Time) (wake bool) {
	timestamp := r.Timestamp.UnixMilli()
	b := p.mu.open
	if b != nil {
		size, _ := recordSize(r, len(b.records), timestamp-b.baseTimestamp)
		if len(b.encoded)+size > maxBytes {
			p.mu.queued = append(p.mu.queued, b)
			p.mu.open, b, wake = nil, nil, true
		}
	}
	if b == nil {
		b = newRecordBatch(p, timestamp, now)
		p.mu.open, wake = b, true
	}
	offsetDelta, timestampDelta := len(b.records), timestamp-b.baseTimestamp
	_, body := recordSize(r, offsetDelta, timestampDelta)
	b.encoded = appendRecord(b.encoded, r, body, offsetDelta, timestampDelta)
	b.records = append(b.records, pendingRecord{r, callback})
	b.bufferedBytes += charge
	b.maxTimestamp = max(b.maxTimestamp, timestamp)
	if len(b.encoded) >= maxBytes {
		p.mu.queued = append(p.mu.queued, b)
		p.mu.open, wake = nil, true
	}
	return wake
}

// producerTopic is the producer's state for one topic. The partition count is fixed when the topic
// is first produced to.
type producerTopic struct {
	name       string
	partitions []*producerPartition

	sticky struct {
		sync.Mutex
		partition int
		batch     *recordBatch // the batch keyless records were going into
	}
}

func newProducerTopic(name string, partitions int) *producerTopic {
	t := &producerTopic{name: name, partitions: make([]*producerPartition, partitions)}
	for i := range t.partitions {
		t.partitions[i] = &producerPartition{topic: name, id: int32(i)}
	}
	t.sticky.partition = -1
	return t
}

// bufferAccount bounds the bytes of records accepted and not yet reported, and counts the
// records, which Flush waits to reach zero.
type bufferAccount struct {
	limit int64

	mu struct {
		sync.Mutex
		bytes   int64
		records int64
		waiting bool
		changed chan struct{} // closed (and replaced) when bytes or records drop and someone waits
	}
}

func newBufferAccount(limit int64) *bufferAccount {
	a := &bufferAccount{limit: limit}
	a.mu.changed = make(chan struct{})
	return a
}

// acquire charges n bytes and one record. When the limit would be passed it fails at once with
// ErrBufferFull (failFast) or waits until room frees, ctx ends or closing is closed. A record
// larger than the whole limit is admitted when the buffer is empty.
func (a *bufferAccount) acquire(ctx context.Context, n int64, failFast bool, closing <-chan struct{}) error {
	a.mu.Lock()
	for a.mu.bytes > 0 && a.mu.bytes+n > a.limit {
		if failFast {
			a.mu.Unlock()
			return ErrBufferFull
		}
		changed := a.mu.changed
		a.mu.waiting = true
		a.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-closing:
			return ErrClosed
		}
		a.mu.Lock()
	}
	a.mu.bytes += n
	a.mu.records++
	a.mu.Unlock()
	return nil
}

// release returns bytes and records.
func (a *bufferAccount) release(bytes, records int64) {
	a.mu.Lock()
	a.mu.bytes -= bytes
	a.mu.records -= records
	if a.mu.bytes < 0 || a.mu.records < 0 {
		a.mu.Unlock()
		panic("client: buffered bytes or records went negative")
	}
	if a.mu.waiting {
		close(a.mu.changed)
		a.mu.changed = make(chan struct{})
		a.mu.waiting = false
	}
	a.mu.Unlock()
}

// waitEmpty waits until no record is buffered or ctx ends.
func (a *bufferAccount) waitEmpty(ctx context.Context) error {
	for {
		a.mu.Lock()
		if a.mu.records == 0 {
			a.mu.Unlock()
			return nil
		}
		changed := a.mu.changed
		a.mu.waiting = true
		a.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// recordsBuffered is the count of records accepted and not yet reported.
func (a *bufferAccount) recordsBuffered() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.records
}
