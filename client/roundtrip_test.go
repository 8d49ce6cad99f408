package client_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
)

type sent struct {
	partition int32
	offset    int64
}

// produceKeyed produces n records with key "key-<i%keys>" and value "value-<i>" and returns where
// each landed.
func produceKeyed(t testing.TB, p *client.Producer, topic string, n, keys int) []sent {
	t.Helper()
	ctx := context.Background()
	where := make([]sent, n)
	var failures sync.Map
	for i := 0; i < n; i++ {
		r := &client.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i%keys), Value: fmt.Appendf(nil, "value-%d", i)}
		index := i
		err := p.Produce(ctx, r, func(r *client.Record, err error) {
			if err != nil {
				failures.Store(index, err)
				return
			}
			where[index] = sent{r.Partition, r.Offset}
		})
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	flushCtx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	if err := p.Flush(flushCtx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	failures.Range(func(k, v any) bool {
		t.Fatalf("record %d failed: %v", k, v)
		return false
	})
	return where
}

// checkRoundTrip consumes n records of topic and compares each with what was produced.
func checkRoundTrip(t testing.TB, c *client.Client, topic string, partitions int32, where []sent, keys int) {
	t.Helper()
	consumer := newConsumer(t, c)
	assignAll(t, consumer, topic, partitions, client.AtStart())
	got := pollN(t, consumer, len(where))
	byPosition := make(map[sent]*client.Record, len(got))
	lastOffset := map[int32]int64{}
	for _, r := range got {
		if last, ok := lastOffset[r.Partition]; ok && r.Offset != last+1 {
			t.Fatalf("partition %d: offset %d follows %d", r.Partition, r.Offset, last)
		}
		lastOffset[r.Partition] = r.Offset
		byPosition[sent{r.Partition, r.Offset}] = r
	}
	for i, w := range where {
		r := byPosition[w]
		if r == nil {
			t.Fatalf("record %d (partition %d offset %d) not consumed", i, w.partition, w.offset)
		}
		wantKey, wantValue := fmt.Appendf(nil, "key-%d", i%keys), fmt.Appendf(nil, "value-%d", i)
		if !bytes.Equal(r.Key, wantKey) || !bytes.Equal(r.Value, wantValue) {
			t.Fatalf("record %d at %d/%d: got %q=%q, want %q=%q", i, w.partition, w.offset, r.Key, r.Value, wantKey, wantValue)
		}
		if want := client.KeyPartition(wantKey, int(partitions)); int(r.Partition) != want {
			t.Fatalf("record %d with key %q in partition %d, murmur2 says %d", i, wantKey, r.Partition, want)
		}
	}
}

// TestMillionKeyedRecords sends a million keyed records through the producer and back through the
// consumer and compares them record by record.
func TestMillionKeyedRecords(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "million", 8)
	p := newProducer(t, c)
	start := time.Now()
	where := produceKeyed(t, p, "million", 1_000_000, 50_000)
	t.Logf("produced 1,000,000 records (acks=all) in %v", time.Since(start))
	start = time.Now()
	checkRoundTrip(t, c, "million", 8, where, 50_000)
	t.Logf("consumed and compared in %v", time.Since(start))
}

// TestZstdRoundTrip produces zstd batches and reads them back.
func TestZstdRoundTrip(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "zstd", 3)
	p := newProducer(t, c, client.WithCompression(client.CompressionZstd), client.WithAcks(client.AcksLeader))
	where := produceKeyed(t, p, "zstd", 50_000, 1000)
	checkRoundTrip(t, c, "zstd", 3, where, 1000)
}

// TestKeylessStickyAndHeaders checks keyless records spread over partitions, and that headers,
// null keys and timestamps survive.
func TestKeylessStickyAndHeaders(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "keyless", 4)
	p := newProducer(t, c, client.WithBatchMaxBytes(4096))
	ctx := context.Background()
	stamp := time.UnixMilli(1_700_000_000_123)
	for i := 0; i < 2000; i++ {
		r := &client.Record{Topic: "keyless", Value: fmt.Appendf(nil, "%d", i), Timestamp: stamp,
			Headers: []client.Header{{Key: "index", Value: fmt.Appendf(nil, "%d", i)}, {Key: "empty"}}}
		if err := p.Produce(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	consumer := newConsumer(t, c)
	assignAll(t, consumer, "keyless", 4, client.AtStart())
	got := pollN(t, consumer, 2000)
	perPartition := map[int32]int{}
	for _, r := range got {
		perPartition[r.Partition]++
		if r.Key != nil || len(r.Headers) != 2 || string(r.Headers[0].Value) != string(r.Value) || r.Headers[1].Value != nil ||
			!r.Timestamp.Equal(stamp) {
			t.Fatalf("record %+v", r)
		}
	}
	if len(perPartition) < 2 {
		t.Fatalf("keyless records all went to one partition: %v", perPartition)
	}
}

// TestConsumerStartOffsets checks Assign at the end, an exact offset and a time.
func TestConsumerStartOffsets(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "offsets", 1)
	p := newProducer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := time.UnixMilli(1_700_000_000_000)
	for i := 0; i < 10; i++ {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "offsets", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(offset client.Offset, wantFirst byte) {
		t.Helper()
		consumer := newConsumer(t, c)
		assignAll(t, consumer, "offsets", 1, offset)
		got := pollN(t, consumer, 10-int(wantFirst))
		if got[0].Value[0] != wantFirst || got[0].Offset != int64(wantFirst) {
			t.Fatalf("%v: first record %d at offset %d, want %d", offset, got[0].Value[0], got[0].Offset, wantFirst)
		}
	}
	check(client.AtStart(), 0)
	check(client.AtOffset(4), 4)
	check(client.AtTime(base.Add(6500*time.Millisecond)), 7)

	consumer := newConsumer(t, c)
	assignAll(t, consumer, "offsets", 1, client.AtEnd())
	if pos, err := consumer.Position(client.TopicPartition{Topic: "offsets", Partition: 0}); err != nil || pos != 10 {
		t.Fatalf("position at end: %d, %v", pos, err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "offsets", Value: []byte{42}}); err != nil {
		t.Fatal(err)
	}
	if got := pollN(t, consumer, 1); got[0].Value[0] != 42 || got[0].Offset != 10 {
		t.Fatalf("after AtEnd got %v at %d", got[0].Value, got[0].Offset)
	}
}
