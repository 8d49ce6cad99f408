package main

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/segment"
)

// TestProbeCountsEveryAppendOnce: every append the probe makes comes back durable exactly once,
// the fdatasyncs behind them are counted, and the bytes are those of the batches.
func TestProbeCountsEveryAppendOnce(t *testing.T) {
	const logs, batchBytes = 3, 4096
	result, err := probe(t.TempDir(), segment.DefaultConfig(), logs, 2e6, batchBytes, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if result.appends < logs || len(result.durable) != result.appends {
		t.Fatalf("%d appends, %d came back durable: want every one, and at least one per log (%d)", result.appends, len(result.durable), logs)
	}
	if len(result.fsyncs) == 0 || len(result.fsyncs) > len(result.durable) {
		t.Fatalf("%d fdatasyncs for %d appends", len(result.fsyncs), len(result.durable))
	}
	perBatch := result.bytes / int64(len(result.durable))
	if perBatch > batchBytes || perBatch < batchBytes-200 {
		t.Fatalf("%d bytes over %d appends: batches should be about %d bytes", result.bytes, len(result.durable), batchBytes)
	}
}
