package batch

import (
	"encoding/binary"
	"time"
)

// Record is one record to be encoded into a batch. A nil Key or Value is encoded as null.
type Record struct {
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
	Timestamp time.Time // zero: the batch's base timestamp
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Builder encodes uncompressed v2 batches. The zero value is ready; Reset starts a new batch.
// Builder is not safe for concurrent use.
type Builder struct {
	buf           []byte
	count         int32
	baseTimestamp int64
	maxTimestamp  int64
	ProducerID    int64 // -1 when not idempotent
	ProducerEpoch int16
	BaseSequence  int32
}

// Reset discards the batch under construction and starts a new one with the given base timestamp.
func (b *Builder) Reset(baseTimestamp time.Time) {
	b.buf = append(b.buf[:0], make([]byte, HeaderSize)...)
	b.count = 0
	b.baseTimestamp = baseTimestamp.UnixMilli()
	b.maxTimestamp = b.baseTimestamp
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = -1, -1, -1
}

// Len is the number of records added since Reset.
func (b *Builder) Len() int { return int(b.count) }

// Size is the encoded size of the batch so far.
func (b *Builder) Size() int { return len(b.buf) }

// Add appends one record.
func (b *Builder) Add(r Record) {
	if len(b.buf) < HeaderSize {
		b.Reset(time.Now())
	}
	timestamp := b.baseTimestamp
	if !r.Timestamp.IsZero() {
		timestamp = r.Timestamp.UnixMilli()
	}
	if timestamp > b.maxTimestamp {
		b.maxTimestamp = timestamp
	}
	var body [binary.MaxVarintLen64 * 4]byte
	n := 0
	body[n] = 0 // record attributes, unused
	n++
	n += binary.PutVarint(body[n:], timestamp-b.baseTimestamp)
	n += binary.PutVarint(body[n:], int64(b.count))
	length := n + bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		length += varintSize(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	b.buf = binary.AppendVarint(b.buf, int64(length))
	b.buf = append(b.buf, body[:n]...)
	b.buf = appendBytes(b.buf, r.Key)
	b.buf = appendBytes(b.buf, r.Value)
	b.buf = binary.AppendVarint(b.buf, int64(len(r.Headers)))
	for _, h := range r.Headers {
		b.buf = binary.AppendVarint(b.buf, int64(len(h.Key)))
		b.buf = append(b.buf, h.Key...)
		b.buf = appendBytes(b.buf, h.Value)
	}
	b.count++
}

// Finish fills in the header (base offset 0) and CRC and returns the batch. The bytes stay owned by
// the Builder until the next Reset.
func (b *Builder) Finish() []byte {
	if len(b.buf) < HeaderSize {
		b.Reset(time.Now())
	}
	h := b.buf
	binary.BigEndian.PutUint64(h, 0)
	binary.BigEndian.PutUint32(h[offsetBatchLength:], uint32(len(h)-LengthPrefix))
	binary.BigEndian.PutUint32(h[offsetLeaderEpoch:], 0)
	h[offsetMagic] = 2
	binary.BigEndian.PutUint16(h[offsetAttributes:], 0)
	binary.BigEndian.PutUint32(h[offsetLastOffsetDelta:], uint32(b.count-1))
	binary.BigEndian.PutUint64(h[offsetBaseTimestamp:], uint64(b.baseTimestamp))
	binary.BigEndian.PutUint64(h[offsetMaxTimestamp:], uint64(b.maxTimestamp))
	binary.BigEndian.PutUint64(h[offsetProducerID:], uint64(b.ProducerID))
	binary.BigEndian.PutUint16(h[offsetProducerEpoch:], uint16(b.ProducerEpoch))
	binary.BigEndian.PutUint32(h[offsetBaseSequence:], uint32(b.BaseSequence))
	binary.BigEndian.PutUint32(h[offsetRecordCount:], uint32(b.count))
	SetCRC(h)
	return h
}

func varintSize(v int64) int {
	var scratch [binary.MaxVarintLen64]byte
	return binary.PutVarint(scratch[:], v)
}

func bytesSize(v []byte) int {
	if v == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(v))) + len(v)
}

func appendBytes(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}
