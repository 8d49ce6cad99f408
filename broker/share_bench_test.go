package broker

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var benchGroups atomic.Int64

// BenchmarkShareGroupDelivery measures delivery through a share group with 20 franz-go workers
// acknowledging every record (accept), against a classic group of 2 members (one per partition)
// on the same 2-partition topic. Each iteration reads the whole topic with a new group.
func BenchmarkShareGroupDelivery(b *testing.B) {
	const records = 100_000
	broker := startBroker(b, nil)
	admin := franzClient(b, broker)
	franzCreateTopic(b, admin, "bench", 2)
	produceNumbered(b, broker, "bench", records)
	run := func(b *testing.B, workers int, opts func(group string) []kgo.Opt, ack bool) {
		b.ReportAllocs()
		start := time.Now()
		for range b.N {
			group := "bench-" + strconv.Itoa(int(benchGroups.Add(1)))
			setGroupConfigs(b, admin, group, map[string]string{"share.auto.offset.reset": "earliest"})
			var delivered atomic.Int64
			done := make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			var clients []*kgo.Client
			finished := make(chan struct{}, workers)
			for range workers {
				client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(broker.Addr().String())}, opts(group)...)...)
				if err != nil {
					b.Fatal(err)
				}
				clients = append(clients, client)
				go func() {
					defer func() { finished <- struct{}{} }()
					for ctx.Err() == nil {
						fetches := client.PollRecords(ctx, 1000)
						fetches.EachRecord(func(r *kgo.Record) {
							if ack {
								r.Ack(kgo.AckAccept)
							}
							if delivered.Add(1) == records {
								close(done)
							}
						})
					}
				}()
			}
			select {
			case <-done:
			case <-time.After(time.Minute):
				b.Fatalf("%d of %d records delivered", delivered.Load(), records)
			}
			cancel()
			for range workers {
				<-finished
			}
			for _, c := range clients {
				c.Close()
			}
		}
		b.ReportMetric(float64(records*b.N)/time.Since(start).Seconds(), "records/s")
	}
	b.Run("share-20-workers", func(b *testing.B) {
		run(b, 20, func(group string) []kgo.Opt {
			return []kgo.Opt{kgo.ShareGroup(group), kgo.ConsumeTopics("bench"), kgo.FetchMaxWait(250 * time.Millisecond)}
		}, true)
	})
	b.Run("classic-2-members", func(b *testing.B) {
		run(b, 2, func(group string) []kgo.Opt {
			return []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
		}, false)
	})
}
