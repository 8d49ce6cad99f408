package client

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

	"github.com/sluice-mq/sluice/batch"
)

// decompressor holds the decoders a consumer shares across its fetches. zstd.Decoder.DecodeAll is
// safe for concurrent use.
type decompressor struct {
	zstd *zstd.Decoder
}

func newDecompressor() (*decompressor, error) {
	decoder, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		return nil, fmt.Errorf("client: zstd decoder: %w", err)
	}
	return &decompressor{zstd: decoder}, nil
}

func (d *decompressor) close() { d.zstd.Close() }

func (d *decompressor) decompress(codec int, data []byte) ([]byte, error) {
	switch codec {
	case batch.CodecNone:
		return data, nil
	case batch.CodecZstd:
		return d.zstd.DecodeAll(data, nil)
	case batch.CodecGzip:
		reader, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(reader)
	case batch.CodecSnappy:
		return decodeSnappy(data)
	default:
		return nil, fmt.Errorf("%w: compression codec %d", ErrUnsupported, codec)
	}
}

// xerialHeader starts snappy data in the Java client's framing (xerial snappy-java): the magic,
// then two 4-byte versions, then blocks each prefixed by its 4-byte length.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decodeSnappy decodes a snappy batch body, raw (franz-go, librdkafka) or xerial-framed (Java).
func decodeSnappy(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialHeader) {
		return snappy.Decode(nil, data)
	}
	data = data[len(xerialHeader):]
	if len(data) < 8 {
		return nil, errors.New("snappy: xerial header cut short")
	}
	data = data[8:]
	var out []byte
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, errors.New("snappy: xerial block length cut short")
		}
		n := int(binary.BigEndian.Uint32(data))
		data = data[4:]
		if n > len(data) {
			return nil, errors.New("snappy: xerial block cut short")
		}
		block, err := snappy.Decode(nil, data[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, block...)
		data = data[n:]
	}
	return out, nil
}

// decodeBatches decodes the records at offsets >= from in the fetched bytes of one partition and
// returns them with the offset to fetch next. Kafka may end the bytes with a partial batch; it is
// dropped and fetched again next time. Control batches (transaction markers) yield no records but
// advance the position. aborted (read_committed only, nil otherwise) drops the batches of aborted
// transactions (decode_txn.go).
func decodeBatches(data []byte, tp TopicPartition, from int64, d *decompressor, aborted *abortedFilter) (records []*Record, next int64, err error) {
	next = from
	for len(data) >= batch.LengthPrefix {
		size := batch.SizeAt(data)
		if size > int64(len(data)) {
			break
		}
		if size < batch.HeaderSize {
			return records, next, fmt.Errorf("%w: %s-%d: batch of %d bytes", ErrMalformed, tp.Topic, tp.Partition, size)
		}
		raw := data[:size]
		data = data[size:]
		h, err := batch.Validate(raw)
		if err != nil {
			return records, next, fmt.Errorf("%w: %s-%d: %w", ErrMalformed, tp.Topic, tp.Partition, err)
		}
		if h.NextOffset() <= from {
			continue
		}
		if aborted.skip(h, raw) || h.IsControl() {
			next = h.NextOffset()
			continue
		}
		body, err := d.decompress(h.Codec(), raw[batch.HeaderSize:])
		if err != nil {
			return records, next, fmt.Errorf("%w: %s-%d batch at %d: %w", ErrMalformed, tp.Topic, tp.Partition, h.BaseOffset, err)
		}
		records, err = decodeRecords(body, h, tp, from, records)
		if err != nil {
			return records, next, err
		}
		next = h.NextOffset()
	}
	return records, next, nil
}

var errShortRecord = errors.New("record cut short")

// decodeRecords appends the records of one (decompressed) batch body with offsets >= from.
func decodeRecords(body []byte, h batch.Header, tp TopicPartition, from int64, out []*Record) ([]*Record, error) {
	count := int(h.RecordCount)
	if count < 0 || count > len(body) {
		return out, fmt.Errorf("%w: %s-%d batch at %d claims %d records in %d bytes", ErrMalformed, tp.Topic, tp.Partition, h.BaseOffset, count, len(body))
	}
	storage := make([]Record, count)
	logAppendTime := h.Attributes&batch.AttributeLogAppendTime != 0
	for i := 0; i < count; i++ {
		r := &storage[i]
		n, err := decodeRecord(body, r, h, logAppendTime)
		if err != nil {
			return out, fmt.Errorf("%w: %s-%d batch at %d record %d: %w", ErrMalformed, tp.Topic, tp.Partition, h.BaseOffset, i, err)
		}
		body = body[n:]
		if r.Offset < from {
			continue
		}
		r.Topic, r.Partition = tp.Topic, tp.Partition
		out = append(out, r)
	}
	return out, nil
}

// decodeRecord decodes one record from the front of body and returns its length.
func decodeRecord(body []byte, r *Record, h batch.Header, logAppendTime bool) (int, error) {
	length, n := binary.Varint(body)
	if n <= 0 || length < 0 || int64(len(body)-n) < length {
		return 0, errShortRecord
	}
	rec := body[n : n+int(length)]
	total := n + int(length)
	if len(rec) < 1 {
		return 0, errShortRecord
	}
	rec = rec[1:] // attributes
	timestampDelta, n := binary.Varint(rec)
	if n <= 0 {
		return 0, errShortRecord
	}
	rec = rec[n:]
	offsetDelta, n := binary.Varint(rec)
	if n <= 0 {
		return 0, errShortRecord
	}
	rec = rec[n:]
	var ok bool
	if r.Key, rec, ok = readVarBytes(rec); !ok {
		return 0, errShortRecord
	}
	if r.Value, rec, ok = readVarBytes(rec); !ok {
		return 0, errShortRecord
	}
	headerCount, n := binary.Varint(rec)
	if n <= 0 || headerCount < 0 || headerCount > int64(len(rec)) {
		return 0, errShortRecord
	}
	rec = rec[n:]
	if headerCount > 0 {
		r.Headers = make([]Header, headerCount)
		for i := range r.Headers {
			var key []byte
			if key, rec, ok = readVarBytes(rec); !ok {
				return 0, errShortRecord
			}
			r.Headers[i].Key = string(key)
			if r.Headers[i].Value, rec, ok = readVarBytes(rec); !ok {
				return 0, errShortRecord
			}
		}
	}
	r.Offset = h.BaseOffset + offsetDelta
	if logAppendTime {
		r.Timestamp = time.UnixMilli(h.MaxTimestamp)
	} else {
		r.Timestamp = time.UnixMilli(h.BaseTimestamp + timestampDelta)
	}
	return total, nil
}

// readVarBytes reads a varint-length byte string (-1: nil).
func readVarBytes(src []byte) (value, rest []byte, ok bool) {
	length, n := binary.Varint(src)
	if n <= 0 || length < -1 || length > int64(len(src)-n) {
		return nil, nil, false
	}
	if length == -1 {
		return nil, src[n:], true
	}
	end := n + int(length)
	return src[n:end:end], src[end:], true
}
