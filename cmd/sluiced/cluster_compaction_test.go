package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/compaction"
)

// TestClusterCompactedReplicasAgree: the three replicas of a compacted partition each clean their
// own log, and each gives the same latest value of every key, the one last acknowledged.
func TestClusterCompactedReplicasAgree(t *testing.T) {
	const topic, keys, writes = "kv", 500, 30_000
	c := startCluster(t, 3, "--cleaner-interval", "50ms")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.01"})
	producer := clusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	latest := map[string]string{}
	var batch []*kgo.Record
	for i := 0; i < writes; i++ {
		key := fmt.Sprintf("key-%d", (i*31)%keys)
		value := fmt.Sprintf("%s=%d", key, i)
		latest[key] = value
		batch = append(batch, &kgo.Record{Key: []byte(key), Value: []byte(value)})
		if len(batch) == 500 {
			if err := producer.ProduceSync(context.Background(), batch...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	series := fmt.Sprintf(`sluice_partition_cleaned_offset{topic=%q,partition="0"}`, topic)
	for _, n := range c.Nodes {
		eventually(t, 60*time.Second, fmt.Sprintf("node %d cleans its replica", n.ID), func() bool {
			v, ok := scrapeMetric(t, n, series)
			return ok && v > writes/2
		})
	}
	for _, n := range c.Nodes {
		if err := n.Stop(60 * time.Second); err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
	}
	for _, n := range c.Nodes {
		raw := readReplica(t, n, topic, 0)
		got := map[string]string{}
		records := 0
		if err := compaction.EachRecord(raw, func(_ int64, key, value []byte) error {
			got[string(key)] = string(value)
			records++
			return nil
		}); err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
		for key, want := range latest {
			if got[key] != want {
				t.Fatalf("node %d: %s = %q, latest acknowledged %q", n.ID, key, got[key], want)
			}
		}
		if records >= writes/2 {
			t.Fatalf("node %d holds %d of %d records: not compacted", n.ID, records, writes)
		}
		t.Logf("node %d: %d records, %d bytes", n.ID, records, len(raw))
	}
}
