package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/replication"
	"github.com/sluice-mq/sluice/segment"
)

// testPartition is a partition over a fresh log in a temp dir.
func testPartition(t *testing.T) *partition {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes, cfg.Preallocate = 1<<20, false
	log, err := segment.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	p, err := newPartition("t", 0, [16]byte{}, log, replication.Config{NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.replica.MakeLeader(0, 0, []int32{1}, []int32{1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProducerStatesEvictLeastRecentlyWritten(t *testing.T) {
	p := testPartition(t)
	appendAs := func(id int64, sequence int32) (int64, bool, error) {
		t.Helper()
		result, duplicate, err := p.appendRecords(idempotentBatch(id, 0, sequence, "v"))
		return result.BaseOffset, duplicate, err
	}
	// Producer 0 writes last of the first lot, so producer 1 is the least recently written when the
	// partition is full.
	for id := int64(1); id < maxProducersPerPartition; id++ {
		if _, _, err := appendAs(id, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := appendAs(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := appendAs(maxProducersPerPartition, 0); err != nil { // one too many: producer 1 goes
		t.Fatal(err)
	}
	if got := len(p.producers.mu.byID); got != maxProducersPerPartition {
		t.Fatalf("%d producers remembered, want %d", got, maxProducersPerPartition)
	}
	// Producer 1 is unknown again: a gap is accepted as a new start rather than refused.
	if _, duplicate, err := appendAs(1, 7); err != nil || duplicate {
		t.Fatalf("forgotten producer: duplicate %v, %v", duplicate, err)
	}
	// Producer 0 is still known: its retry is a duplicate, its gap refused.
	if offset, duplicate, err := appendAs(0, 0); err != nil || !duplicate || offset != maxProducersPerPartition-1 {
		t.Fatalf("producer 0 retry: offset %d duplicate %v, %v", offset, duplicate, err)
	}
	if _, _, err := appendAs(0, 5); !errors.Is(err, protocol.OutOfOrderSequenceNumber) {
		t.Fatalf("producer 0 gap: %v", err)
	}
}

func TestAppendRecordsSeveralProducersInOneAppend(t *testing.T) {
	p := testPartition(t)
	records := append(idempotentBatch(1, 0, 0, "a", "b"), recordBatch(batchTime, "plain")...)
	records = append(records, idempotentBatch(2, 0, 10, "c")...)
	records = append(records, idempotentBatch(1, 0, 2, "d")...)
	result, duplicate, err := p.appendRecords(records)
	if err != nil || duplicate || result.BaseOffset != 0 || result.LastOffset != 4 {
		t.Fatalf("append: %+v duplicate %v, %v", result, duplicate, err)
	}
	check := func(id int64, epoch int16, want ...appendedBatch) {
		t.Helper()
		tracked := p.producers.mu.byID[id]
		if tracked == nil || tracked.entry.epoch != epoch || tracked.entry.count != len(want) {
			t.Fatalf("producer %d: %+v", id, tracked)
		}
		for i, w := range want {
			if tracked.entry.batches[i] != w {
				t.Fatalf("producer %d batch %d: %+v, want %+v", id, i, tracked.entry.batches[i], w)
			}
		}
	}
	check(1, 0, appendedBatch{0, 1, 0, 1}, appendedBatch{2, 2, 4, 4})
	check(2, 0, appendedBatch{10, 10, 3, 3})
	// A later batch of the same append that breaks the rules refuses the whole append.
	bad := append(idempotentBatch(1, 0, 3, "e"), idempotentBatch(1, 0, 5, "gap")...)
	if _, _, err := p.appendRecords(bad); !errors.Is(err, protocol.OutOfOrderSequenceNumber) {
		t.Fatalf("append with a gap inside: %v", err)
	}
	if end := p.log.LogEndOffset(); end != 5 {
		t.Fatalf("log end %d after a refused append, want 5", end)
	}
	check(1, 0, appendedBatch{0, 1, 0, 1}, appendedBatch{2, 2, 4, 4})
}

// TestReadLogTailIsBoundedAndEndsAtTheEnd: the rebuild reads whole batches up to the log end within
// the budget (the last batch even when it alone is larger), and producers whose batches lie before
// that tail stay unknown.
func TestReadLogTailIsBoundedAndEndsAtTheEnd(t *testing.T) {
	p := testPartition(t)
	value := strings.Repeat("v", 1000)
	appendPlain := func(records []byte) {
		t.Helper()
		if _, err := p.log.Append(records, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Offset 0 from producer 1, then more than producerTailBytes from producer 2 (offsets 1..last).
	appendPlain(idempotentBatch(1, 0, 0, value))
	batches := int32(producerTailBytes/1000 + 100)
	last := int64(batches)
	for n := range batches {
		appendPlain(idempotentBatch(2, 0, n, value))
	}
	tail, err := readLogTail(p.log, 5000)
	if err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	if _, err := batch.Scan(tail, func(h batch.Header, _ []byte) error {
		offsets = append(offsets, h.BaseOffset)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(tail) > 5000+1100 || len(offsets) < 2 || offsets[len(offsets)-1] != last {
		t.Fatalf("tail of %d bytes holds offsets %v", len(tail), offsets)
	}
	for i := 1; i < len(offsets); i++ {
		if offsets[i] != offsets[i-1]+1 {
			t.Fatalf("tail not contiguous: %v", offsets)
		}
	}
	if tail, err := readLogTail(p.log, 10); err != nil || len(tail) == 0 || batch.BaseOffsetAt(tail) != last {
		t.Fatalf("tiny budget: %d bytes, %v", len(tail), err)
	}

	// Producer 2's last batches are in the tail: its retry is a duplicate. Producer 1's are not: it
	// is unknown, and its next batch starts over whatever its sequence.
	result, duplicate, err := p.appendRecords(idempotentBatch(2, 0, batches-1, value))
	if err != nil || !duplicate || result.BaseOffset != last {
		t.Fatalf("retry of the last batch: %+v duplicate %v, %v", result, duplicate, err)
	}
	if _, _, err := p.appendRecords(idempotentBatch(2, 0, batches+1, value)); !errors.Is(err, protocol.OutOfOrderSequenceNumber) {
		t.Fatalf("gap after the rebuild: %v", err)
	}
	if _, duplicate, err := p.appendRecords(idempotentBatch(1, 0, 0, value)); err != nil || duplicate {
		t.Fatalf("producer outside the tail: duplicate %v, %v", duplicate, err)
	}
}
