package broker

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

func TestFirstRecordAtOrAfter(t *testing.T) {
	var b batch.Builder
	base := time.UnixMilli(1_000_000)
	b.Reset(base)
	for i := 0; i < 5; i++ {
		b.Add(batch.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i*10) * time.Millisecond)})
	}
	raw := append([]byte(nil), b.Finish()...)
	batch.SetBaseOffset(raw, 100)
	check := func(target, wantOffset, wantTimestamp int64, wantOK bool) {
		t.Helper()
		offset, timestamp, ok := firstRecordAtOrAfter(raw, target)
		if ok != wantOK || (ok && (offset != wantOffset || timestamp != wantTimestamp)) {
			t.Errorf("target %d: got %d %d %v, want %d %d %v", target, offset, timestamp, ok, wantOffset, wantTimestamp, wantOK)
		}
	}
	check(0, 100, 1_000_000, true)
	check(1_000_000, 100, 1_000_000, true)
	check(1_000_001, 101, 1_000_010, true)
	check(1_000_040, 104, 1_000_040, true)
	check(1_000_041, 0, 0, false)
	check(1_000_020, 102, 1_000_020, true)
	if _, _, ok := firstRecordAtOrAfter(raw[:len(raw)-1], 0); ok {
		t.Error("truncated batch accepted")
	}
}
