package compaction

import (
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/batch"
)

// EachRecordHeader calls fn with the offset and each header of every record in raw (whole v2
// batches, compressed or not; a trailing partial batch, as a fetch range may end with, is
// ignored), in log order, until fn returns false. Control batches are skipped. The broker's
// request tracing uses it to find W3C traceparent headers; it reads only what it is given.
func EachRecordHeader(raw []byte, fn func(offset int64, key, value []byte) bool) error {
	var c *codecs
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	stopped := errors.New("stopped")
	_, err := batch.Scan(raw, func(h batch.Header, b []byte) error {
		if h.IsControl() || h.RecordCount <= 0 {
			return nil
		}
		records := b[batch.HeaderSize:]
		if h.Codec() != batch.CodecNone {
			if c == nil {
				c, _ = newCodecs()
			}
			var err error
			if records, err = c.batchRecords(h, b); err != nil {
				return err
			}
		}
		return parseRecords(records, int(h.RecordCount), func(r record) error {
			if !eachHeader(r.raw, func(key, value []byte) bool { return fn(h.BaseOffset+r.offsetDelta, key, value) }) {
				return stopped
			}
			return nil
		})
	})
	switch {
	case errors.Is(err, stopped), errors.Is(err, batch.ErrTruncated):
		return nil
	case err != nil:
		return fmt.Errorf("compaction: record headers: %w", err)
	}
	return nil
}

// eachHeader walks the headers of one record (raw: length prefix included, already checked by
// parseRecords up to its value) and reports whether fn wanted more. Malformed headers end the
// walk quietly: fn has seen every header that parsed.
func eachHeader(raw []byte, fn func(key, value []byte) bool) bool {
	body, ok := skipVarint(raw) // length
	if !ok || len(body) < 1 {
		return true
	}
	body = body[1:] // attributes
	for range 2 {   // timestamp delta, offset delta
		if body, ok = skipVarint(body); !ok {
			return true
		}
	}
	for range 2 { // key, value
		var length int64
		if length, body, ok = varint(body); !ok || length > int64(len(body)) {
			return true
		}
		if length > 0 {
			body = body[length:]
		}
	}
	count, body, ok := varint(body)
	if !ok {
		return true
	}
	for range count {
		var key, value []byte
		if key, body, ok = lengthPrefixed(body); !ok {
			return true
		}
		if value, body, ok = lengthPrefixed(body); !ok {
			return true
		}
		if !fn(key, value) {
			return false
		}
	}
	return true
}

func skipVarint(b []byte) ([]byte, bool) {
	_, rest, ok := varint(b)
	return rest, ok
}

// lengthPrefixed reads a varint length and that many bytes (nil for length -1).
func lengthPrefixed(b []byte) ([]byte, []byte, bool) {
	length, rest, ok := varint(b)
	if !ok || length < -1 || length > int64(len(rest)) {
		return nil, b, false
	}
	if length < 0 {
		return nil, rest, true
	}
	return rest[:length], rest[length:], true
}
