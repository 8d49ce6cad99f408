package compaction

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

func builtBatch(t testing.TB, codec int, records ...batch.Record) []byte {
	t.Helper()
	var b batch.Builder
	b.Reset(time.UnixMilli(1_700_000_000_000))
	for _, r := range records {
		b.Add(r)
	}
	raw := bytes.Clone(b.Finish())
	if codec == batch.CodecNone {
		return raw
	}
	c, _ := newCodecs()
	defer c.close()
	body, err := c.compress(nil, codec, raw[batch.HeaderSize:], false)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw[:batch.HeaderSize], body...)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-batch.LengthPrefix))
	binary.BigEndian.PutUint16(raw[21:], uint16(codec))
	batch.SetCRC(raw)
	return raw
}

func TestRequireKeys(t *testing.T) {
	for _, codec := range []int{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		keyed := builtBatch(t, codec, batch.Record{Key: []byte("a"), Value: []byte("1")}, batch.Record{Key: []byte("b")})
		if err := RequireKeys(keyed); err != nil {
			t.Fatalf("codec %d: keyed records refused: %v", codec, err)
		}
		keyless := builtBatch(t, codec, batch.Record{Key: []byte("a"), Value: []byte("1")}, batch.Record{Value: []byte("no key")})
		if err := RequireKeys(append(keyed, keyless...)); !errors.Is(err, ErrMissingKey) {
			t.Fatalf("codec %d: a keyless record passed: %v", codec, err)
		}
	}
}

func TestEachRecord(t *testing.T) {
	raw := builtBatch(t, batch.CodecZstd, batch.Record{Key: []byte("a"), Value: []byte("1")}, batch.Record{Key: []byte("b")})
	var got []string
	if err := EachRecord(raw, func(offset int64, key, value []byte) error {
		got = append(got, string(key)+"="+string(value)+map[bool]string{true: "(null)"}[value == nil])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "a=1" || got[1] != "b=(null)" {
		t.Fatalf("records %q", got)
	}
}

// FuzzParseRecords: record parsing never panics and never reads past what it was given.
func FuzzParseRecords(f *testing.F) {
	raw := builtBatch(f, batch.CodecNone, batch.Record{Key: []byte("key"), Value: []byte("value")}, batch.Record{Key: []byte("k")})
	f.Add(raw[batch.HeaderSize:], 2)
	f.Add([]byte{0x02, 0x00}, 1)
	f.Fuzz(func(t *testing.T, records []byte, count int) {
		if count < 0 || count > 1000 {
			return
		}
		total := 0
		parseRecords(records, count, func(r record) error {
			total += len(r.raw)
			if len(r.key) > len(r.raw) {
				t.Fatalf("key of %d bytes in a record of %d", len(r.key), len(r.raw))
			}
			if len(r.value) > len(r.raw) || (r.value == nil) != r.tombstone {
				t.Fatalf("value of %d bytes (tombstone %v) in a record of %d", len(r.value), r.tombstone, len(r.raw))
			}
			return nil
		})
		if total > len(records) {
			t.Fatalf("records of %d bytes claimed from %d", total, len(records))
		}
	})
}
