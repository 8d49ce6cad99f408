package client_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

// TestFranzGoReadsOurRecords: records this producer writes (plain and zstd, with headers) are read
// back by franz-go at the partitions and offsets the callbacks reported.
func TestFranzGoReadsOurRecords(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	for _, codec := range []client.Compression{client.CompressionNone, client.CompressionZstd} {
		topic := fmt.Sprintf("ours-%d", codec)
		createTopic(t, c, topic, 4)
		p := newProducer(t, c, client.WithCompression(codec))
		const n = 20_000
		where := make([]sent, n)
		ctx := context.Background()
		for i := 0; i < n; i++ {
			r := &client.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i%500), Value: fmt.Appendf(nil, "v%d", i),
				Headers: []client.Header{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}}}
			index := i
			if err := p.Produce(ctx, r, func(r *client.Record, err error) {
				if err != nil {
					t.Errorf("record %d: %v", index, err)
				}
				where[index] = sent{r.Partition, r.Offset}
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}

		franz, err := kgo.NewClient(kgo.SeedBrokers(address), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		got := map[sent]*kgo.Record{}
		pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
		for len(got) < n && pollCtx.Err() == nil {
			fetches := franz.PollFetches(pollCtx)
			fetches.EachError(func(topic string, partition int32, err error) {
				if pollCtx.Err() == nil {
					t.Fatalf("franz-go fetch %s-%d: %v", topic, partition, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) { got[sent{r.Partition, r.Offset}] = r })
		}
		cancel()
		franz.Close()
		if len(got) != n {
			t.Fatalf("%s: franz-go read %d records, want %d", topic, len(got), n)
		}
		for i, w := range where {
			r := got[w]
			if r == nil || string(r.Key) != fmt.Sprintf("k%d", i%500) || string(r.Value) != fmt.Sprintf("v%d", i) ||
				len(r.Headers) != 1 || r.Headers[0].Key != "i" || string(r.Headers[0].Value) != fmt.Sprint(i) {
				t.Fatalf("%s: record %d at %v read by franz-go as %+v", topic, i, w, r)
			}
		}
	}
}

// TestKcatReadsOurRecords: kcat (librdkafka) reads what this producer wrote, plain and zstd.
func TestKcatReadsOurRecords(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat)")
	}
	address := startBroker(t)
	c := newClient(t, address)
	for _, codec := range []client.Compression{client.CompressionNone, client.CompressionZstd} {
		topic := fmt.Sprintf("kcat-%d", codec)
		createTopic(t, c, topic, 3)
		p := newProducer(t, c, client.WithCompression(codec))
		var want []string
		var mu sync.Mutex
		ctx := context.Background()
		for i := 0; i < 5000; i++ {
			r := &client.Record{Topic: topic, Key: fmt.Appendf(nil, "key%d", i%77), Value: fmt.Appendf(nil, "value %d", i)}
			if err := p.Produce(ctx, r, func(r *client.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
					return
				}
				mu.Lock()
				want = append(want, fmt.Sprintf("%d %d %s %s", r.Partition, r.Offset, r.Key, r.Value))
				mu.Unlock()
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		consume := exec.Command("kcat", "-C", "-b", address, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%p %o %k %s\n`)
		var stderr bytes.Buffer
		consume.Stderr = &stderr
		out, err := consume.Output()
		if err != nil {
			t.Fatalf("kcat: %v\n%s", err, stderr.String())
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s: kcat read %d lines, want %d; first got %q want %q", topic, len(got), len(want), got[0], want[0])
		}
	}
}

// TestWeReadFranzGoRecords: records franz-go writes, plain and zstd, are read by this consumer at
// the partitions and offsets franz-go reported.
func TestWeReadFranzGoRecords(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	for name, codec := range map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "zstd": kgo.ZstdCompression()} {
		topic := "franz-" + name
		createTopic(t, c, topic, 4)
		franz, err := kgo.NewClient(kgo.SeedBrokers(address), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec),
			kgo.ProducerLinger(2*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		const n = 20_000
		type franzSent struct {
			key, value string
			headers    int
		}
		want := make(map[sent]franzSent, n)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "fk%d", i%300), Value: fmt.Appendf(nil, "fv%d", i)}
			if i%2 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "even", Value: []byte("yes")}}
			}
			wg.Add(1)
			franz.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("franz-go produce: %v", err)
					return
				}
				mu.Lock()
				want[sent{r.Partition, r.Offset}] = franzSent{string(r.Key), string(r.Value), len(r.Headers)}
				mu.Unlock()
			})
		}
		wg.Wait()
		franz.Close()

		consumer := newConsumer(t, c)
		assignAll(t, consumer, topic, 4, client.AtStart())
		for _, r := range pollN(t, consumer, n) {
			w, ok := want[sent{r.Partition, r.Offset}]
			if !ok || w.key != string(r.Key) || w.value != string(r.Value) || w.headers != len(r.Headers) {
				t.Fatalf("%s: read %s=%s (%d headers) at %d/%d, franz-go wrote %+v there", topic, r.Key, r.Value, len(r.Headers), r.Partition, r.Offset, w)
			}
			if w.headers == 1 && (r.Headers[0].Key != "even" || string(r.Headers[0].Value) != "yes") {
				t.Fatalf("%s: header %+v", topic, r.Headers[0])
			}
		}
	}
}
