package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKillDuringCleaning kills sluiced with SIGKILL again and again while the cleaner runs (every
// 5 ms over 16 KiB segments under constant keyed writes): each restart reads the whole log back, and
// every key's latest acknowledged value is there (or a later write of the key).
func TestKillDuringCleaning(t *testing.T) {
	const topic, keys, rounds = "state", 300, 10
	dataDir := t.TempDir()
	args := []string{"--cleaner-interval", "5ms"}
	d := startDaemon(t, dataDir, args...)
	createTopicWithConfigs(t, newClient(t, d.kafka), topic, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
	})
	acked := map[string]latestValue{}
	rng := rand.New(rand.NewPCG(3, 4))
	cutShort := 0 // rounds whose kill left a swap or a cleaned segment half done
	for round := 0; round < rounds; round++ {
		producer, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.DisableIdempotentWrite(), kgo.ProducerLinger(time.Millisecond), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				records := make([]*kgo.Record, 50)
				for j := range records {
					key := fmt.Sprintf("k%03d", (i*50+j*7)%keys)
					records[j] = &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("%s@%d.%d.%d", key, round, i, j))}
				}
				results := producer.ProduceSync(ctx, records...)
				mu.Lock()
				for _, r := range results {
					if r.Err == nil {
						if prev, ok := acked[string(r.Record.Key)]; !ok || r.Record.Offset > prev.offset {
							acked[string(r.Record.Key)] = latestValue{offset: r.Record.Offset, value: string(r.Record.Value)}
						}
					}
				}
				mu.Unlock()
			}
		}()
		startPasses := 0
		awaitMetric(t, "cleaning passes", func() bool {
			n, _ := strconv.Atoi(d.metric(t, "sluice_cleaner_passes_total"))
			if startPasses == 0 {
				startPasses = max(n, 1)
			}
			return n >= startPasses+2
		})
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // a random point of the next pass, not a wait for a condition
		d.kill()
		cancel()
		producer.Close() // fails what is still buffered or in flight; acknowledged records are final
		wg.Wait()
		if strays, _ := filepath.Glob(filepath.Join(dataDir, "topics", "*", "*.cleaned")); len(strays) > 0 {
			cutShort++
		} else if _, err := os.Stat(filepath.Join(dataDir, "topics", topic+"-0", "replace")); err == nil {
			cutShort++
		}

		d = startDaemon(t, dataDir, args...)
		admin := newClient(t, d.kafka)
		end := logEnd(t, admin, topic)
		stored := map[string]latestValue{}
		for _, r := range readCompacted(t, d.kafka, topic, end) {
			stored[r.key] = latestValue{offset: r.offset, value: r.value}
		}
		mu.Lock()
		for key, want := range acked {
			got, ok := stored[key]
			switch {
			case !ok:
				t.Fatalf("round %d: acknowledged key %s (offset %d) lost", round, key, want.offset)
			case got.offset < want.offset:
				t.Fatalf("round %d: key %s reads %q at %d, acknowledged %q at %d", round, key, got.value, got.offset, want.value, want.offset)
			case got.offset == want.offset && got.value != want.value:
				t.Fatalf("round %d: key %s at %d reads %q, acknowledged %q", round, key, got.offset, got.value, want.value)
			}
			if !strings.HasPrefix(got.value, key+"@") {
				t.Fatalf("round %d: key %s holds %q", round, key, got.value)
			}
		}
		mu.Unlock()
	}
	t.Logf("%d of %d kills left a cleaning pass cut short on disk", cutShort, rounds)
}

// TestConnectConfigTopicStaysBounded: a Kafka-Connect-style config topic (a handful of keys, each
// rewritten over and over; 100,000 writes in all) stays at a bounded size on disk with the default
// dirty ratio.
func TestConnectConfigTopicStaysBounded(t *testing.T) {
	const topic, keys, writes = "connect-configs", 5, 100_000
	d := startDaemon(t, t.TempDir(), "--cleaner-interval", "50ms")
	createTopicWithConfigs(t, newClient(t, d.kafka), topic, map[string]string{"cleanup.policy": "compact", "segment.bytes": "65536"})
	producer := newClient(t, d.kafka, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := context.Background()
	sizeMetric := `sluice_partition_size_bytes{topic="connect-configs",partition="0"}`
	largest, written := int64(0), 0
	batch := make([]*kgo.Record, 0, 20)
	for i := 0; i < writes; i++ {
		value := fmt.Sprintf(`{"connector.class":"FileStreamSource","tasks.max":"1","generation":%d}`, i)
		written += len(value)
		batch = append(batch, &kgo.Record{Key: []byte(fmt.Sprintf("connector-%d", i%keys)), Value: []byte(value)})
		if len(batch) < cap(batch) {
			continue
		}
		if err := producer.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
		if i%5000 == 4999 {
			size, _ := strconv.ParseInt(d.metric(t, sizeMetric), 10, 64)
			largest = max(largest, size)
		}
	}
	const bound = 512 << 10 // the active segment, a few sealed ones awaiting the cleaner, the cleaned rest
	if largest > bound || largest == 0 {
		t.Fatalf("the topic reached %d bytes on disk (%d bytes of values written), want at most %d", largest, written, bound)
	}
	t.Logf("%d bytes of values written, the log never exceeded %d bytes", written, largest)
	end := logEnd(t, newClient(t, d.kafka), topic)
	latest := map[string]string{}
	for _, r := range readCompacted(t, d.kafka, topic, end) {
		latest[r.key] = r.value
	}
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("connector-%d", k)
		if want := fmt.Sprintf(`"generation":%d}`, writes-keys+k); !strings.HasSuffix(latest[key], want) {
			t.Fatalf("%s = %q, want generation %d", key, latest[key], writes-keys+k)
		}
	}
}
