package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClient(t testing.TB, address string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(address)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

func createTopic(t testing.TB, client *kgo.Client, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 30_000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error %d", name, code)
	}
}

type consumed struct {
	partition int32
	offset    int64
	key       string
	value     string
}

// consumeAll reads topic from the start until want records arrived.
func consumeAll(t testing.TB, address, topic string, want int) []consumed {
	t.Helper()
	client := newClient(t, address, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out []consumed
	for len(out) < want {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timing out", len(out), want)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Fatalf("fetch %s-%d: %v", topic, partition, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			out = append(out, consumed{r.Partition, r.Offset, string(r.Key), string(r.Value)})
		})
	}
	return out
}

// TestFranzGoKeyedRoundTrip produces a million keyed records through franz-go into an 8-partition
// topic and consumes them back: every record arrives once, in order per partition, and each key
// stays in one partition.
func TestFranzGoKeyedRoundTrip(t *testing.T) {
	records := 1_000_000
	if testing.Short() {
		records = 50_000
	}
	d := startDaemon(t, t.TempDir())
	producer := newClient(t, d.kafka, kgo.ProducerLinger(5*time.Millisecond), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	createTopic(t, producer, "keyed", 8)

	const keys = 10_000
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var produceErr error
	ctx := context.Background()
	for i := 0; i < records; i++ {
		key := i % keys
		wg.Add(1)
		producer.Produce(ctx, &kgo.Record{Topic: "keyed", Key: []byte("key-" + strconv.Itoa(key)), Value: []byte(strconv.Itoa(i))},
			func(r *kgo.Record, err error) {
				if err != nil {
					errMu.Lock()
					produceErr = err
					errMu.Unlock()
				}
				wg.Done()
			})
	}
	wg.Wait()
	if produceErr != nil {
		t.Fatalf("produce: %v", produceErr)
	}

	got := consumeAll(t, d.kafka, "keyed", records)
	if len(got) != records {
		t.Fatalf("consumed %d records, want %d", len(got), records)
	}
	seen := make([]bool, records)
	keyPartition := map[string]int32{}
	lastOffset := map[int32]int64{}
	lastValueOfKey := map[string]int{}
	for _, r := range got {
		i, err := strconv.Atoi(r.value)
		if err != nil || i < 0 || i >= records || seen[i] {
			t.Fatalf("record %+v: bad or repeated value", r)
		}
		seen[i] = true
		if want := "key-" + strconv.Itoa(i%keys); r.key != want {
			t.Fatalf("record %d has key %q, want %q", i, r.key, want)
		}
		if p, ok := keyPartition[r.key]; ok && p != r.partition {
			t.Fatalf("key %s in partitions %d and %d", r.key, p, r.partition)
		}
		keyPartition[r.key] = r.partition
		if last, ok := lastOffset[r.partition]; ok && r.offset != last+1 {
			t.Fatalf("partition %d: offset %d after %d", r.partition, r.offset, last)
		}
		lastOffset[r.partition] = r.offset
		if last, ok := lastValueOfKey[r.key]; ok && i < last {
			t.Fatalf("key %s: record %d after %d (order lost)", r.key, i, last)
		}
		lastValueOfKey[r.key] = i
	}
	if len(lastOffset) != 8 {
		t.Fatalf("records landed in %d partitions, want 8", len(lastOffset))
	}
}

// TestKcatRoundTrip pipes 100,000 lines through kcat (librdkafka) and back.
func TestKcatRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	d := startDaemon(t, t.TempDir())
	var input bytes.Buffer
	for i := 1; i <= 100_000; i++ {
		fmt.Fprintf(&input, "line %d\n", i)
	}
	produce := exec.Command("kcat", "-P", "-b", d.kafka, "-t", "lines", "-X", "topic.request.required.acks=-1")
	produce.Stdin = bytes.NewReader(input.Bytes())
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	consume := exec.Command("kcat", "-C", "-b", d.kafka, "-t", "lines", "-o", "beginning", "-e", "-q")
	var stderr bytes.Buffer
	consume.Stderr = &stderr
	out, err := consume.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, stderr.String())
	}
	if !bytes.Equal(out, input.Bytes()) {
		gotLines, wantLines := strings.Count(string(out), "\n"), 100_000
		t.Fatalf("kcat read back %d bytes in %d lines, want %d bytes in %d lines", len(out), gotLines, input.Len(), wantLines)
	}
}

// TestKillDuringAcksAll kills the broker with SIGKILL while a producer writes with acks=all, restarts
// it on the same data dir and finds every acknowledged record at the offset it was acknowledged with.
func TestKillDuringAcksAll(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	admin := newClient(t, d.kafka)
	createTopic(t, admin, "durable", 4)
	producer, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordDeliveryTimeout(5*time.Second), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	type ack struct {
		partition int32
		offset    int64
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	enoughAcks := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			value := strconv.Itoa(i)
			producer.Produce(ctx, &kgo.Record{Topic: "durable", Value: []byte(value)}, func(r *kgo.Record, err error) {
				if err != nil {
					return
				}
				mu.Lock()
				acked[value] = ack{r.Partition, r.Offset}
				if len(acked) == 20_000 {
					close(enoughAcks)
				}
				mu.Unlock()
			})
		}
	}()
	select {
	case <-enoughAcks:
	case <-time.After(60 * time.Second):
		t.Fatal("producer got no 20,000 acknowledgements")
	}
	d.kill() // mid-produce
	cancel()
	wg.Wait()
	producer.Close() // fails whatever is still buffered; acknowledged records are final now
	mu.Lock()
	want := len(acked)
	mu.Unlock()

	restarted := startDaemon(t, dataDir)
	client := newClient(t, restarted.kafka)
	ends := map[int32]int64{}
	req := kmsg.NewPtrListOffsetsRequest()
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = "durable"
	for p := int32(0); p < 4; p++ {
		part := kmsg.NewListOffsetsRequestTopicPartition()
		part.Partition, part.Timestamp = p, -1
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range resp.Topics[0].Partitions {
		ends[p.Partition] = p.Offset
		total += int(p.Offset)
	}
	got := consumeAll(t, restarted.kafka, "durable", total)
	stored := map[string]consumed{}
	for _, r := range got {
		stored[r.value] = r
	}
	for value, a := range acked {
		r, ok := stored[value]
		if !ok {
			t.Fatalf("acknowledged record %s (partition %d offset %d) lost; partition ends %v", value, a.partition, a.offset, ends)
		}
		if r.partition != a.partition || r.offset != a.offset {
			t.Fatalf("record %s acknowledged at %d/%d, found at %d/%d", value, a.partition, a.offset, r.partition, r.offset)
		}
	}
	t.Logf("%d acknowledged records all present after kill -9; %d stored in all", want, len(got))
}

// TestCleanRestartAndSendfile stops the broker with SIGTERM, restarts it and reads everything back,
// and checks that fetches were served with sendfile.
func TestCleanRestartAndSendfile(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	client := newClient(t, d.kafka, kgo.DisableIdempotentWrite())
	createTopic(t, client, "restart", 2)
	for i := 0; i < 1000; i++ {
		if err := client.ProduceSync(context.Background(), &kgo.Record{Topic: "restart", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil && i == 0 {
			t.Fatal(err)
		}
	}
	client.Close()
	before := d.metric(t, "sluice_net_sendfile_bytes_total")
	consumeAll(t, d.kafka, "restart", 1000)
	after := d.metric(t, "sluice_net_sendfile_bytes_total")
	b, _ := strconv.Atoi(before)
	a, _ := strconv.Atoi(after)
	if a <= b {
		t.Fatalf("sendfile bytes did not rise during fetches: %q -> %q", before, after)
	}
	d.stop()
	if !strings.Contains(d.logs(), "stopped cleanly") {
		t.Fatalf("no clean stop logged:\n%s", d.logs())
	}
	restarted := startDaemon(t, dataDir)
	got := consumeAll(t, restarted.kafka, "restart", 1000)
	if len(got) != 1000 {
		t.Fatalf("after restart %d records", len(got))
	}
}
