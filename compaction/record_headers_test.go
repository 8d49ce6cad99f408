package compaction

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// headerBatch builds one uncompressed batch at baseOffset whose records carry the given headers.
func headerBatch(baseOffset int64, headers ...[]batch.RecordHeader) []byte {
	var b batch.Builder
	b.Reset(time.Now())
	for i, h := range headers {
		b.Add(batch.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v"), Headers: h})
	}
	raw := b.Finish()
	binary.BigEndian.PutUint64(raw, uint64(baseOffset))
	return raw
}

func TestEachRecordHeaderFindsHeadersWithOffsets(t *testing.T) {
	raw := headerBatch(10,
		[]batch.RecordHeader{{Key: "traceparent", Value: []byte("a")}},
		nil,
		[]batch.RecordHeader{{Key: "x", Value: nil}, {Key: "traceparent", Value: []byte("b")}})
	raw = append(raw, headerBatch(13, []batch.RecordHeader{{Key: "traceparent", Value: []byte("c")}})...)
	var got []string
	err := EachRecordHeader(raw, func(offset int64, key, value []byte) bool {
		got = append(got, fmt.Sprintf("%d:%s=%s", offset, key, value))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]string{"10:traceparent=a", "12:x=", "12:traceparent=b", "13:traceparent=c"})
	if fmt.Sprint(got) != want {
		t.Fatalf("headers = %v, want %v", got, want)
	}

	// A fetch range may end inside a batch: what came before is still walked.
	got = got[:0]
	if err := EachRecordHeader(raw[:len(raw)-5], func(offset int64, key, value []byte) bool {
		got = append(got, string(value))
		return true
	}); err != nil || len(got) != 3 {
		t.Fatalf("truncated range: headers %v, err %v; want the first batch's 3", got, err)
	}

	// fn returning false stops the walk.
	calls := 0
	if err := EachRecordHeader(raw, func(int64, []byte, []byte) bool { calls++; return false }); err != nil || calls != 1 {
		t.Fatalf("stop: %d calls, err %v", calls, err)
	}
}

func TestEachRecordHeaderRefusesCorruptBatch(t *testing.T) {
	raw := headerBatch(0, []batch.RecordHeader{{Key: "traceparent", Value: []byte("a")}})
	raw[len(raw)-1] ^= 0xff // breaks the CRC
	if err := EachRecordHeader(raw, func(int64, []byte, []byte) bool { return true }); err == nil {
		t.Fatal("a batch with a bad CRC was walked without error")
	}
}
