// Command clientload compares sluice's client producer with franz-go's side by side, against the
// same broker from the same process: records per second (wall clock) and CPU per record (user+system
// time of this process from getrusage, so the broker's own CPU is not counted). The clients take
// turns, several rounds each, each on a fresh topic.
//
//	clientload --brokers 127.0.0.1:9092 --records 2000000 --rounds 3
//
// Each run deletes its topic afterwards. Timed runs include the producer's Close (sluice) or the
// wait for the last callback (franz-go); topic creation happens before the producing starts.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

type settings struct {
	brokers    string
	partitions int32
	records    int
	valueSize  int
	linger     time.Duration
}

func main() {
	var s settings
	flag.StringVar(&s.brokers, "brokers", "127.0.0.1:9092", "seed broker")
	partitions := flag.Int("partitions", 8, "partitions per topic")
	flag.IntVar(&s.records, "records", 2_000_000, "records per run")
	flag.IntVar(&s.valueSize, "value-size", 100, "value bytes per record")
	flag.DurationVar(&s.linger, "linger", 5*time.Millisecond, "producer linger")
	rounds := flag.Int("rounds", 3, "runs per client")
	only := flag.String("only", "", "run only this client: sluice or franz")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the sluice client runs here")
	flag.Parse()
	s.partitions = int32(*partitions)

	values := make([][]byte, 1024)
	for i := range values {
		values[i] = make([]byte, s.valueSize)
		rand.Read(values[i])
	}
	fmt.Printf("%d records of %d B, %d partitions, acks=1, linger %v, keyless, no compression\n", s.records, s.valueSize, s.partitions, s.linger)
	for round := 1; round <= *rounds; round++ {
		if *only != "sluice" {
			report("franz-go", round, s.records, measure(func() error { return runFranz(s, values, round) }))
		}
		if *only != "franz" {
			var profile *os.File
			if *cpuProfile != "" {
				profile, _ = os.Create(fmt.Sprintf("%s.%d", *cpuProfile, round))
				pprof.StartCPUProfile(profile)
			}
			result := measure(func() error { return runSluice(s, values, round) })
			if profile != nil {
				pprof.StopCPUProfile()
				profile.Close()
			}
			report("sluice ", round, s.records, result)
		}
	}
}

type result struct {
	wall, cpu time.Duration
	err       error
}

func cpuTime() time.Duration {
	var usage syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

func measure(run func() error) result {
	runtime.GC()
	cpuBefore, start := cpuTime(), time.Now()
	err := run()
	return result{time.Since(start), cpuTime() - cpuBefore, err}
}

func report(name string, round, records int, r result) {
	if r.err != nil {
		fmt.Printf("%s round %d: error: %v\n", name, round, r.err)
		return
	}
	fmt.Printf("%s round %d: %9.0f records/s  %6.1f MB/s  cpu %6.0f ns/record  (wall %v, cpu %v)\n", name, round,
		float64(records)/r.wall.Seconds(), float64(records*100)/r.wall.Seconds()/1e6,
		float64(r.cpu.Nanoseconds())/float64(records), r.wall.Round(time.Millisecond), r.cpu.Round(time.Millisecond))
}

func createTopic(ctx context.Context, admin *client.Admin, name string, partitions int32) error {
	return admin.CreateTopics(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: 1})
}

func runSluice(s settings, values [][]byte, round int) error {
	ctx := context.Background()
	c, err := client.New(client.WithSeedBrokers(s.brokers))
	if err != nil {
		return err
	}
	defer c.Close()
	topic := fmt.Sprintf("sluice-%d-%d", time.Now().UnixNano(), round)
	if err := createTopic(ctx, client.NewAdmin(c), topic, s.partitions); err != nil {
		return err
	}
	p, err := client.NewProducer(ctx, c, client.WithAcks(client.AcksLeader), client.WithLinger(s.linger),
		client.WithBatchMaxBytes(1<<20), client.WithMaxBufferedBytes(128<<20))
	if err != nil {
		return err
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	callback := func(_ *client.Record, err error) {
		if err != nil && failed.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	records := make([]client.Record, s.records)
	for i := range records {
		records[i] = client.Record{Topic: topic, Value: values[i%len(values)]}
		if err := p.Produce(ctx, &records[i], callback); err != nil {
			return err
		}
	}
	if err := p.Close(ctx); err != nil {
		return err
	}
	// The broker preallocates segments: drop the topic so that rounds do not fill the disk.
	defer client.NewAdmin(c).DeleteTopics(ctx, topic)
	if failed.Load() > 0 {
		return fmt.Errorf("%d records failed, first: %v", failed.Load(), firstErr.Load())
	}
	return nil
}

func runFranz(s settings, values [][]byte, round int) error {
	ctx := context.Background()
	producer, err := kgo.NewClient(kgo.SeedBrokers(s.brokers), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(s.linger), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return err
	}
	defer producer.Close()
	topic := fmt.Sprintf("franz-%d-%d", time.Now().UnixNano(), round)
	create := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, s.partitions, 1
	create.Topics = append(create.Topics, t)
	if _, err := create.RequestWith(ctx, producer); err != nil {
		return err
	}
	var failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(s.records)
	records := make([]kgo.Record, s.records)
	callback := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
		wg.Done()
	}
	for i := range records {
		records[i] = kgo.Record{Topic: topic, Value: values[i%len(values)]}
		producer.Produce(ctx, &records[i], callback)
	}
	wg.Wait()
	deleteReq := kmsg.NewPtrDeleteTopicsRequest()
	deleteReq.TopicNames = []string{topic}
	deleteTopic := kmsg.NewDeleteTopicsRequestTopic()
	deleteTopic.Topic = kmsg.StringPtr(topic)
	deleteReq.Topics = append(deleteReq.Topics, deleteTopic)
	deleteReq.RequestWith(ctx, producer)
	if failed.Load() > 0 {
		return fmt.Errorf("%d records failed", failed.Load())
	}
	return nil
}
