package broker

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/protocol"
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
	return &partition{topic: "t", index: 0, log: log}
}

func TestProducerStatesEvictLeastRecentlyWritten(t *testing.T) {
	p := testPartition(t)
	appendAs := func(id int64, sequence int32) (int64, bool, error) {
		t.Helper()
		result, duplicate, err := p.appendRecords(idempotentBatch(id, 0, sequence, "v"), 0)
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
	result, duplicate, err := p.appendRecords(records, 0)
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
	if _, _, err := p.appendRecords(bad, 0); !errors.Is(err, protocol.OutOfOrderSequenceNumber) {
		t.Fatalf("append with a gap inside: %v", err)
	}
	if end := p.log.LogEndOffset(); end != 5 {
		t.Fatalf("log end %d after a refused append, want 5", end)
	}
	check(1, 0, appendedBatch{0, 1, 0, 1}, appendedBatch{2, 2, 4, 4})
}
