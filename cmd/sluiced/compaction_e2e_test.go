package main

// Log compaction end to end: a real sluiced, franz-go, kcat (librdkafka) and this repo's client.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

func createTopicWithConfigs(t testing.TB, admin *kgo.Client, name string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, 1, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		topic.Configs = append(topic.Configs, c)
	}
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error %d", name, code)
	}
}

// latestValue is what a reader makes of a compacted partition: per key, its last record.
type latestValue struct {
	offset    int64
	value     string
	tombstone bool
}

// readCompacted reads partition 0 of topic from the start with franz-go up to end (exclusive) and
// returns every record in order.
func readCompacted(t testing.TB, address, topic string, end int64) []consumed {
	t.Helper()
	c := newClient(t, address, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []consumed
	for last := int64(-1); last < end-1; {
		fetches := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go read up to offset %d of %d", last, end)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) {
			value := string(r.Value)
			if r.Value == nil {
				value = "<tombstone>"
			}
			out = append(out, consumed{r.Partition, r.Offset, string(r.Key), value})
			last = r.Offset
		})
	}
	return out
}

func logEnd(t testing.TB, admin *kgo.Client, topic string) int64 {
	t.Helper()
	offsets, err := kadmListEnd(admin, topic)
	if err != nil {
		t.Fatal(err)
	}
	return offsets
}

func kadmListEnd(admin *kgo.Client, topic string) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Timestamp = -1
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), admin)
	if err != nil {
		return 0, err
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		return 0, kerr.ErrorForCode(code)
	}
	return resp.Topics[0].Partitions[0].Offset, nil
}

// TestCompactedTopicReadBack is the first acceptance test scaled down tenfold (100,000
// records over 10,000 keys instead of 1,000,000, to run in seconds; SLUICE_COMPACTION_RECORDS sets
// the count, and make soak runs the full size): updates and tombstones, cleaned,
// then read from the start by franz-go, kcat and sluice's client, which agree and see exactly the
// latest value of each live key, no deleted key once delete.retention.ms passed, in offset order.
func TestCompactedTopicReadBack(t *testing.T) {
	const keys, topic = 10_000, "table"
	records := 100_000
	if n, err := strconv.Atoi(os.Getenv("SLUICE_COMPACTION_RECORDS")); err == nil && n > 0 {
		records = n // make soak: the full 1,000,000
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat)")
	}
	d := startDaemon(t, t.TempDir(), "--cleaner-interval", "50ms")
	admin := newClient(t, d.kafka)
	createTopicWithConfigs(t, admin, topic, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "262144", "segment.ms": "500",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
	})
	producer := newClient(t, d.kafka, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(2*time.Millisecond))
	ctx := context.Background()

	// Keyless records are refused.
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}

	latest := map[string]*string{}
	rng := rand.New(rand.NewPCG(7, 7))
	produce := func(n int, tombstones bool) {
		var batch []*kgo.Record
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("key-%05d", rng.IntN(keys))
			r := &kgo.Record{Key: []byte(key)}
			if tombstones && rng.IntN(30) == 0 {
				latest[key] = nil
			} else {
				value := fmt.Sprintf("%s=%d", key, i)
				r.Value = []byte(value)
				latest[key] = &value
			}
			batch = append(batch, r)
			if len(batch) == 2000 || i == n-1 {
				if err := producer.ProduceSync(ctx, batch...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	produce(records, true)
	passes := func() int { n, _ := strconv.Atoi(d.metric(t, "sluice_cleaner_passes_total")); return n }
	// A second round of updates (no deletions) after the first pass cleaned the tombstones, so that
	// later passes find them past delete.retention.ms.
	awaitMetric(t, "a cleaning pass", func() bool { return passes() >= 1 })
	for key, value := range latest {
		if value != nil && rng.IntN(2) == 0 {
			v := key + "=again"
			latest[key] = &v
			if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Everything up to here must be cleaned: keep appending a sentinel so that the active segment
	// rolls (segment.ms) and the cleaner reaches the last real record.
	lastReal := logEnd(t, admin, topic) - 1
	cleanedOffset := `sluice_partition_cleaned_offset{topic="table",partition="0"}`
	awaitMetric(t, "the cleaner to pass the last real record", func() bool {
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte("sentinel"), Value: []byte("s")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(d.metric(t, cleanedOffset), 10, 64)
		return n > lastReal
	})
	end := logEnd(t, admin, topic)

	check := func(reader string, got []consumed) {
		t.Helper()
		seen := map[string]bool{}
		last := int64(-1)
		for _, r := range got {
			if r.offset <= last {
				t.Fatalf("%s: offset %d after %d", reader, r.offset, last)
			}
			last = r.offset
			if r.key == "sentinel" {
				continue
			}
			want, ok := latest[r.key]
			switch {
			case !ok:
				t.Fatalf("%s: unknown key %q", reader, r.key)
			case seen[r.key]:
				t.Fatalf("%s: key %q twice", reader, r.key)
			case want == nil:
				t.Fatalf("%s: deleted key %q at %d (%q) outlived delete.retention.ms", reader, r.key, r.offset, r.value)
			case *want != r.value:
				t.Fatalf("%s: key %q = %q, latest is %q", reader, r.key, r.value, *want)
			}
			seen[r.key] = true
		}
		for key, value := range latest {
			if value != nil && !seen[key] {
				t.Fatalf("%s: live key %q lost", reader, key)
			}
		}
	}
	franz := readCompacted(t, d.kafka, topic, end)
	check("franz-go", franz)

	kcat := exec.Command("kcat", "-C", "-b", d.kafka, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-Z", "-f", "%o\t%k\t%s\n")
	var stderr bytes.Buffer
	kcat.Stderr = &stderr
	out, err := kcat.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.String())
	}
	var fromKcat []consumed
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		fields := strings.SplitN(line, "\t", 3)
		if len(fields) != 3 {
			t.Fatalf("kcat line %q", line)
		}
		offset, _ := strconv.ParseInt(fields[0], 10, 64)
		value := fields[2]
		if value == "NULL" {
			value = "<tombstone>"
		}
		fromKcat = append(fromKcat, consumed{0, offset, fields[1], value})
	}
	check("kcat", fromKcat)

	fromClient := readWithSluiceClient(t, d.kafka, topic, end)
	check("sluice client", fromClient)
	if len(franz) != len(fromKcat) || len(franz) != len(fromClient) {
		t.Fatalf("franz-go read %d records, kcat %d, sluice's client %d", len(franz), len(fromKcat), len(fromClient))
	}
	for i := range franz {
		if franz[i] != fromKcat[i] || franz[i] != fromClient[i] {
			t.Fatalf("record %d: franz-go %+v, kcat %+v, client %+v", i, franz[i], fromKcat[i], fromClient[i])
		}
	}
	if reclaimed, _ := strconv.Atoi(d.metric(t, "sluice_cleaner_reclaimed_bytes_total")); reclaimed <= 0 {
		t.Fatalf("reclaimed bytes metric %d", reclaimed)
	}
}

func readWithSluiceClient(t testing.TB, address, topic string, end int64) []consumed {
	t.Helper()
	c, err := client.New(client.WithSeedBrokers(address))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	consumer, err := client.NewConsumer(c)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := consumer.Assign(ctx, client.Assignment{Topic: topic, Partition: 0, Offset: client.AtStart()}); err != nil {
		t.Fatal(err)
	}
	var out []consumed
	for last := int64(-1); last < end-1; {
		fetches, err := consumer.Poll(ctx)
		if err != nil {
			t.Fatalf("sluice client read up to %d of %d: %v", last, end, err)
		}
		for _, f := range fetches {
			if f.Err != nil {
				t.Fatalf("sluice client: %v", f.Err)
			}
			for _, r := range f.Records {
				value := string(r.Value)
				if r.Value == nil {
					value = "<tombstone>"
				}
				out = append(out, consumed{r.Partition, r.Offset, string(r.Key), value})
				last = r.Offset
			}
		}
	}
	return out
}

// awaitMetric polls condition until it holds (60 s at most).
func awaitMetric(t testing.TB, what string, condition func() bool) {
	t.Helper()
	eventually(t, 60*time.Second, what, condition)
}
