package broker

// Idempotent producers end to end: franz-go's default producer (idempotent) against an in-process
// broker; what it wrote is read back whole, once, and under its producer id. (sluice's own client is
// tested the same way in package interop, so that this package's tests build without it.)

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestIdempotentFranzProducer(t *testing.T) {
	const topic, partitions, count = "idempotent-franz", 4, 200_000
	b := startBroker(t, nil)
	dial(t, b).createTopic(topic, partitions, nil)
	ctx := groupTestContext(t)

	producer := franzClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond))
	id, epoch, err := producer.ProducerID(ctx)
	if err != nil || id < 0 || epoch != 0 {
		t.Fatalf("franz-go producer id %d epoch %d: %v (idempotence not in use)", id, epoch, err)
	}
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		producer.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(&err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("produce: %v", *err)
	}

	total := int64(0)
	for i := range int32(partitions) {
		p, err := b.registry.partition(topic, i)
		if err != nil {
			t.Fatal(err)
		}
		total += p.log.LogEndOffset()
	}
	if total != count {
		t.Fatalf("the logs hold %d records, %d were produced", total, count)
	}

	consumer := franzClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := make([]bool, count)
	for consumed := 0; consumed < count; {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", consumed, count, err)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Fatalf("fetch %s-%d: %v", topic, partition, err)
		})
		for _, r := range fetches.Records() {
			value, err := strconv.Atoi(string(r.Value))
			if err != nil || value < 0 || value >= count || seen[value] {
				t.Fatalf("record %q at %d-%d: unknown or seen before", r.Value, r.Partition, r.Offset)
			}
			if r.ProducerID != id || r.ProducerEpoch != epoch {
				t.Fatalf("record at %d-%d written by producer %d epoch %d, want %d/%d", r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, id, epoch)
			}
			seen[value] = true
			consumed++
		}
	}
}
