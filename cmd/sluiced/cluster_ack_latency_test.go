package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterAcksAllDoNotWaitForParkedFetches: an acks=all produce is answered as soon as the
// followers have the batch, never after a follower's fetch parked at the leader on another
// partition gives up waiting. Responses on a connection leave in request order, so a parked fetch
// holds back every response behind it; with the fetch wait set far above the per-produce deadline
// here, any acknowledgement that queues behind one fails the test.
//
// The second topic is created while the followers' fetches for the first are parked, so its
// partitions start fetching while another fetch to the same leader waits.
func TestClusterAcksAllDoNotWaitForParkedFetches(t *testing.T) {
	c := startCluster(t, 3, "--replica-fetch-wait-max", "30s", "--replica-lag-time-max", "60s")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, "parked-a", 3, 3, map[string]string{"min.insync.replicas": "3"})
	awaitFullISR(t, admin, "parked-a", 20*time.Second)
	producer := clusterClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var slowest time.Duration
	produce := func(topic string, partition int32, value string) {
		t.Helper()
		started := time.Now()
		record := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}
		if err := producer.ProduceSync(context.Background(), record).FirstErr(); err != nil {
			t.Fatalf("acks=all produce to %s-%d after %v (the followers' fetches wait 30 s): %v", topic, partition, time.Since(started).Round(time.Millisecond), err)
		}
		took := time.Since(started)
		slowest = max(slowest, took)
		if took > 5*time.Second {
			t.Fatalf("acks=all produce to %s-%d took %v: it waited for a parked fetch (the followers' fetches wait 30 s)", topic, partition, took.Round(time.Millisecond))
		}
	}
	for p := range int32(3) {
		produce("parked-a", p, "first")
	}
	createReplicatedTopic(t, admin, "parked-b", 3, 3, map[string]string{"min.insync.replicas": "3"})
	awaitFullISR(t, admin, "parked-b", 20*time.Second)
	for i := range 12 {
		produce("parked-b", int32(i%3), fmt.Sprintf("b-%d", i))
		produce("parked-a", int32(i%3), fmt.Sprintf("a-%d", i))
	}
	t.Logf("slowest acks=all produce: %v", slowest.Round(time.Millisecond))
}
