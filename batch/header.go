package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sizes and positions of the v2 batch header.
const (
	HeaderSize = 61 // bytes before the first record
	// LengthPrefix is the number of bytes (baseOffset and batchLength) not counted by batchLength.
	LengthPrefix = 12
	// MinBatchLength is the smallest legal batchLength: a header with no records.
	MinBatchLength = HeaderSize - LengthPrefix

	offsetBatchLength     = 8
	offsetLeaderEpoch     = 12
	offsetMagic           = 16
	offsetCRC             = 17
	offsetAttributes      = 21
	offsetLastOffsetDelta = 23
	offsetBaseTimestamp   = 27
	offsetMaxTimestamp    = 35
	offsetProducerID      = 43
	offsetProducerEpoch   = 51
	offsetBaseSequence    = 53
	offsetRecordCount     = 57
)

// Attribute bits.
const (
	AttributeCodecMask     = 0x07
	AttributeLogAppendTime = 0x08
	AttributeTransactional = 0x10
	AttributeControl       = 0x20
)

// Compression codecs carried in the attribute bits.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// Error classes. Every error returned by this package wraps exactly one of them.
var (
	// ErrTruncated: the bytes end before the batch (or its header) does. At the tail of a log this is a
	// torn write; inside a request it is a malformed request.
	ErrTruncated = errors.New("batch: truncated")
	// ErrCorrupt: the bytes cannot be a valid batch (bad length, CRC mismatch, zeroed space).
	ErrCorrupt = errors.New("batch: corrupt")
	// ErrUnsupportedMagic: a message format other than v2 (Kafka's magic 0 and 1).
	ErrUnsupportedMagic = errors.New("batch: unsupported magic")
	// ErrInvalidRecord: structurally sound but semantically invalid (count and offset delta disagree,
	// a negative delta).
	ErrInvalidRecord = errors.New("batch: invalid record")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded 61-byte header of a v2 batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the total size of the batch in bytes, header included.
func (h Header) Size() int { return int(h.BatchLength) + LengthPrefix }

// LastOffset is the offset of the last record of the batch.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the compression codec from the attribute bits.
func (h Header) Codec() int { return int(h.Attributes & AttributeCodecMask) }

// IsControl reports whether the batch is a transaction control batch.
func (h Header) IsControl() bool { return h.Attributes&AttributeControl != 0 }

// IsTransactional reports whether the batch belongs to a transaction.
func (h Header) IsTransactional() bool { return h.Attributes&AttributeTransactional != 0 }

// ParseHeader decodes the header at the start of b and checks what can be checked without the
// records: the header is complete, magic is 2 and batchLength is plausible. It does not require the
// whole batch to be present and does not check the CRC.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		if len(b) > offsetMagic && (b[offsetMagic] == 0 || b[offsetMagic] == 1) && int32(binary.BigEndian.Uint32(b[offsetBatchLength:])) > 0 {
			return Header{}, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, b[offsetMagic])
		}
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrTruncated, len(b), HeaderSize)
	}
	h := Header{
		BaseOffset:           int64(binary.BigEndian.Uint64(b)),
		BatchLength:          int32(binary.BigEndian.Uint32(b[offsetBatchLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offsetLeaderEpoch:])),
		Magic:                int8(b[offsetMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offsetCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offsetAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offsetLastOffsetDelta:])),
		BaseTimestamp:        int64(binary.BigEndian.Uint64(b[offsetBaseTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offsetMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offsetProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offsetProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offsetBaseSequence:])),
		RecordCount:          int32(binary.BigEndian.Uint32(b[offsetRecordCount:])),
	}
	if h.BatchLength <= 0 {
		return h, fmt.Errorf("%w: batch length %d", ErrCorrupt, h.BatchLength)
	}
	if h.Magic != 2 {
		if h.Magic == 0 || h.Magic == 1 {
			return h, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, h.Magic)
		}
		return h, fmt.Errorf("%w: magic %d", ErrCorrupt, h.Magic)
	}
	if h.BatchLength < MinBatchLength {
		return h, fmt.Errorf("%w: batch length %d below minimum %d", ErrCorrupt, h.BatchLength, MinBatchLength)
	}
	return h, nil
}

// Validate parses the batch at the start of b and checks it completely: header, length within b, CRC
// and record count (at most lastOffsetDelta + 1: see CheckProduced). It returns the header; the batch occupies b[:h.Size()].
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() > len(b) {
		return h, fmt.Errorf("%w: batch of %d bytes, %d present", ErrTruncated, h.Size(), len(b))
	}
	if got := crc32.Checksum(b[offsetAttributes:h.Size()], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, got)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: negative last offset delta %d", ErrInvalidRecord, h.LastOffsetDelta)
	}
	if h.RecordCount < 0 || h.RecordCount > h.LastOffsetDelta+1 {
		return h, fmt.Errorf("%w: %d records but last offset delta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	}
	return h, nil
}

// CheckProduced applies the rule a batch fresh from a producer must meet beyond Validate: it holds
// one record per offset (count = lastOffsetDelta + 1). Stored batches may hold fewer: compaction
// removes records but keeps each kept batch's offset range, and may leave batches with no records
// (Kafka does the same), so Validate, which recovery and replication use, accepts them.
func CheckProduced(h Header) error {
	if h.RecordCount != h.LastOffsetDelta+1 {
		return fmt.Errorf("%w: %d records but last offset delta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	}
	return nil
}

// SetBaseOffset rewrites the base offset of the batch at the start of b. The CRC does not cover it.
func SetBaseOffset(b []byte, offset int64) { binary.BigEndian.PutUint64(b, uint64(offset)) }

// SetLeaderEpoch rewrites the partition leader epoch of the batch at the start of b.
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offsetLeaderEpoch:], uint32(epoch))
}

// ChecksumOf computes the CRC-32C a batch must carry: over bytes 21 to the end of the batch.
func ChecksumOf(b []byte) uint32 { return crc32.Checksum(b[offsetAttributes:], castagnoli) }

// SetCRC recomputes and stores the CRC of the whole batch b (b must be exactly one batch).
func SetCRC(b []byte) { binary.BigEndian.PutUint32(b[offsetCRC:], ChecksumOf(b)) }

// BaseOffsetAt and SizeAt read the two leading fields of a batch without validating anything; b must
// hold at least LengthPrefix bytes.
func BaseOffsetAt(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

// SizeAt returns the total size claimed by the batch at the start of b.
func SizeAt(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[offsetBatchLength:]))) + LengthPrefix
}
