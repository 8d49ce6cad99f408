package main

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/segment"
)

// TestProbeCountsEveryAppendOnce: every append the probe makes comes back durable exactly once,
// the fdatasyncs behind them are counted, and the bytes are those of the batches; with segment.Logs
// and with plain files (-raw).
func TestProbeCountsEveryAppendOnce(t *testing.T) {
	for name, run := range map[string]func(string, segment.Config, int, float64, int, time.Duration) (*outcome, error){"logs": probe, "raw": probeRaw} {
		t.Run(name, func(t *testing.T) {
			const logs, batchBytes = 3, 4096
			cfg := segment.DefaultConfig()
			cfg.SegmentBytes = 1 << 20
			result, err := run(t.TempDir(), cfg, logs, 2e6, batchBytes, 300*time.Millisecond)
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
		})
	}
}
