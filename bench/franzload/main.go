// Command franzload measures a Kafka-protocol broker with franz-go as the client: produce throughput
// and per-record produce latency (from Produce to its acknowledgement), then consumption throughput
// of what was produced. It is the interim measuring tool until `sluice bench` exists.
//
//	franzload --brokers 127.0.0.1:9092 --records 5000000 --acks 1
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "seed broker")
	topic := flag.String("topic", fmt.Sprintf("load-%d", time.Now().UnixNano()), "topic (created if missing)")
	partitions := flag.Int("partitions", 8, "partitions of a created topic")
	records := flag.Int("records", 2_000_000, "records to produce")
	valueSize := flag.Int("value-size", 100, "value bytes per record")
	acks := flag.Int("acks", 1, "acks: 0, 1 or -1")
	linger := flag.Duration("linger", 5*time.Millisecond, "producer linger")
	rate := flag.Int("rate", 0, "records per second (0: as fast as possible)")
	consume := flag.Bool("consume", true, "consume the records back and time it")
	compression := flag.String("compression", "none", "producer compression: none, snappy or zstd")
	flag.Parse()
	if err := run(*brokers, *topic, int32(*partitions), *records, *valueSize, int16(*acks), *linger, *rate, *consume, *compression); err != nil {
		fmt.Fprintln(os.Stderr, "franzload:", err)
		os.Exit(1)
	}
}

func run(brokers, topic string, partitions int32, records, valueSize int, acks int16, linger time.Duration, rate int, consume bool, compression string) error {
	codec := kgo.NoCompression()
	switch compression {
	case "snappy":
		codec = kgo.SnappyCompression()
	case "zstd":
		codec = kgo.ZstdCompression()
	case "none":
	default:
		return fmt.Errorf("unknown compression %q", compression)
	}
	ackOpt := kgo.LeaderAck()
	switch acks {
	case 0:
		ackOpt = kgo.NoAck()
	case -1:
		ackOpt = kgo.AllISRAcks()
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RequiredAcks(ackOpt), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(linger), kgo.ProducerBatchCompression(codec), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return err
	}
	defer producer.Close()
	ctx := context.Background()
	create := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, 1
	create.Topics = append(create.Topics, t)
	if _, err := create.RequestWith(ctx, producer); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}

	// Incompressible values, so that compression (if chosen) cannot flatter the figures.
	values := make([][]byte, 1024)
	for i := range values {
		values[i] = make([]byte, valueSize)
		rand.Read(values[i])
	}
	latencies := make([]time.Duration, records)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < records; i++ {
		if rate > 0 {
			if due := start.Add(time.Duration(i) * time.Second / time.Duration(rate)); time.Until(due) > 0 {
				time.Sleep(time.Until(due))
			}
		}
		sent := time.Now()
		index := i
		wg.Add(1)
		producer.Produce(ctx, &kgo.Record{Topic: topic, Value: values[index%len(values)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
			latencies[index] = time.Since(sent)
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	pick := func(q float64) time.Duration { return latencies[min(len(latencies)-1, int(q*float64(len(latencies))))] }
	fmt.Printf("produce: %d records of %d B, acks=%d, linger %v, rate %s: %.0f records/s, %.1f MB/s; latency p50 %v p99 %v p99.9 %v max %v; failed %d\n",
		records, valueSize, acks, linger, rateText(rate), float64(records)/elapsed.Seconds(),
		float64(records*valueSize)/elapsed.Seconds()/1e6, pick(0.5), pick(0.99), pick(0.999), latencies[len(latencies)-1], failed.Load())
	if !consume {
		return nil
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(8<<20))
	if err != nil {
		return err
	}
	defer consumer.Close()
	got := 0
	start = time.Now()
	for got < records {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		got += fetches.NumRecords()
	}
	elapsed = time.Since(start)
	fmt.Printf("consume: %d records: %.0f records/s, %.1f MB/s\n", got, float64(got)/elapsed.Seconds(), float64(got*valueSize)/elapsed.Seconds()/1e6)
	return nil
}

func rateText(rate int) string {
	if rate == 0 {
		return "max"
	}
	return fmt.Sprintf("%d/s", rate)
}
