package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/protocol"
)

// TestFetchFromDamagedPartition flips a bit in a one-batch sealed segment while the broker is down.
// After the restart the partition keeps every segment: batches before and after the damage are
// served, a fetch of the damaged offset gets CORRUPT_MESSAGE, and the next produce gets the next
// offset (the damaged segment and everything after it used to be deleted, and their offsets handed
// out again).
func TestFetchFromDamagedPartition(t *testing.T) {
	const topic = "damaged"
	cfg := testConfig(t, t.TempDir())
	cfg.Log.SegmentBytes = 1024 // one 600-byte batch per segment
	b := startBrokerWith(t, cfg)
	c := dial(t, b)
	c.createTopic(topic, 1, nil)
	value := func(i int) string { return fmt.Sprintf("%d-%s", i, strings.Repeat("v", 600)) }
	for i := range 6 {
		if offset := c.mustProduce(topic, 0, recordBatch(batchTime, value(i))); offset != int64(i) {
			t.Fatalf("produce %d got offset %d", i, offset)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.DataDir, "topics", topic+"-0", fmt.Sprintf("%020d.log", 2))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the batch at offset 2 should sit alone in its segment: %v", err)
	}
	data[len(data)-100] ^= 0x10 // in the record's value: only the CRC notices
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	cfg.Metrics = metrics.NewSet()
	b = startBrokerWith(t, cfg)
	c = dial(t, b)
	for offset := int64(0); offset < 6; offset++ {
		result := c.fetchPartition(fetchRequest(12, topic, 0, offset, 1<<20))
		if result.HighWatermark != 6 {
			t.Fatalf("fetch at %d: high watermark %d, want 6", offset, result.HighWatermark)
		}
		if offset == 2 {
			if result.ErrorCode != protocol.CorruptMessage.Code || len(result.RecordBatches) != 0 {
				t.Fatalf("fetch of the damaged offset: error %d, %d bytes; want CORRUPT_MESSAGE", result.ErrorCode, len(result.RecordBatches))
			}
			continue
		}
		got, err := decodeBatches(result.RecordBatches)
		if result.ErrorCode != 0 || err != nil || len(got) == 0 || got[0].offset != offset || got[0].value != value(int(offset)) {
			t.Fatalf("fetch at %d: error %d, %v, %+v", offset, result.ErrorCode, err, got)
		}
	}
	if offset := c.mustProduce(topic, 0, recordBatch(batchTime, "after")); offset != 6 {
		t.Fatalf("produce after the restart got offset %d, want 6", offset)
	}
}
