package compaction

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/batch"
)

// ErrMalformed: a record inside a batch does not parse.
var ErrMalformed = errors.New("compaction: malformed record")

// record is one record of a v2 batch, located in the batch's (decompressed) records.
type record struct {
	raw         []byte // the whole record, its length prefix included: copied as is when kept
	offsetDelta int64
	key         []byte // nil: no key (null)
	value       []byte // nil when tombstone
	tombstone   bool   // the value is null
}

// parseRecords calls fn with each record of records (a batch's decompressed body).
func parseRecords(records []byte, count int, fn func(r record) error) error {
	for i := 0; i < count; i++ {
		length, n := binary.Varint(records)
		if n <= 0 || length < 0 || int64(len(records)-n) < length {
			return fmt.Errorf("%w: record %d: bad length", ErrMalformed, i)
		}
		r := record{raw: records[:n+int(length)]}
		body := records[n : n+int(length)]
		records = records[n+int(length):]
		if len(body) < 1 {
			return fmt.Errorf("%w: record %d: empty", ErrMalformed, i)
		}
		body = body[1:] // attributes
		var ok bool
		if _, body, ok = varint(body); !ok { // timestamp delta
			return fmt.Errorf("%w: record %d: timestamp", ErrMalformed, i)
		}
		if r.offsetDelta, body, ok = varint(body); !ok {
			return fmt.Errorf("%w: record %d: offset delta", ErrMalformed, i)
		}
		var keyLength int64
		if keyLength, body, ok = varint(body); !ok || keyLength < -1 || keyLength > int64(len(body)) {
			return fmt.Errorf("%w: record %d: key", ErrMalformed, i)
		}
		if keyLength >= 0 {
			r.key, body = body[:keyLength], body[keyLength:]
		}
		var valueLength int64
		if valueLength, body, ok = varint(body); !ok || valueLength < -1 || valueLength > int64(len(body)) {
			return fmt.Errorf("%w: record %d: value", ErrMalformed, i)
		}
		r.tombstone = valueLength < 0
		if !r.tombstone {
			r.value = body[:valueLength]
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if len(records) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrMalformed, len(records))
	}
	return nil
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// batchRecords returns the decompressed records of a whole batch raw whose header is h.
func (c *codecs) batchRecords(h batch.Header, raw []byte) ([]byte, error) {
	return c.decompress(h.Codec(), raw[batch.HeaderSize:h.Size()])
}

// RequireKeys reports an error wrapping ErrMissingKey when a record of the batches in raw (as a
// producer sent them) has no key: compacted topics refuse them (Kafka answers INVALID_RECORD).
func RequireKeys(raw []byte) error {
	var c *codecs
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	_, err := batch.Scan(raw, func(h batch.Header, b []byte) error {
		if h.IsControl() {
			return nil
		}
		if h.Codec() != batch.CodecNone && c == nil {
			var err error
			if c, err = newCodecs(); err != nil {
				return err
			}
		}
		var records []byte
		var err error
		if h.Codec() == batch.CodecNone {
			records = b[batch.HeaderSize:]
		} else if records, err = c.batchRecords(h, b); err != nil {
			return err
		}
		return parseRecords(records, int(h.RecordCount), func(r record) error {
			if r.key == nil {
				return fmt.Errorf("%w: record at offset delta %d", ErrMissingKey, r.offsetDelta)
			}
			return nil
		})
	})
	return err
}

// ErrMissingKey: a record without a key was sent to a compacted topic.
var ErrMissingKey = errors.New("compaction: compacted topics require a key on every record")

// EachRecord calls fn with each record of the whole batches in raw (as a log or a fetch holds
// them, any codec), in offset order: its offset, key and value (nil for a null key or value). Tests
// and tools use it to read what a compacted log holds.
func EachRecord(raw []byte, fn func(offset int64, key, value []byte) error) error {
	c, err := newCodecs()
	if err != nil {
		return err
	}
	defer c.close()
	_, err = batch.Scan(raw, func(h batch.Header, b []byte) error {
		if h.IsControl() {
			return nil
		}
		records, err := c.batchRecords(h, b)
		if err != nil {
			return err
		}
		return parseRecords(records, int(h.RecordCount), func(r record) error {
			return fn(h.BaseOffset+r.offsetDelta, r.key, r.value)
		})
	})
	return err
}
