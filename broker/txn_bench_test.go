package broker

// Transactional produce throughput against idempotent produce, franz-go against an in-process
// broker: 100-byte records into 8 partitions, acks=all, transactions of 100 and 10,000 records.
//
//	go test -run '^$' -bench BenchmarkTransactionalProduce -benchtime 200000x ./broker/

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func BenchmarkTransactionalProduce(b *testing.B) {
	value := make([]byte, 100)
	run := func(b *testing.B, perTxn int) {
		broker := startBroker(b, nil)
		topic := "bench-txn"
		dial(b, broker).createTopic(topic, 8, nil)
		opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}
		if perTxn > 0 {
			opts = append(opts, kgo.TransactionalID(fmt.Sprintf("bench-%d", perTxn)), kgo.TransactionTimeout(time.Minute))
		}
		client := franzClient(b, broker, opts...)
		ctx := context.Background()
		var wait sync.WaitGroup
		var failed error
		var mu sync.Mutex
		produce := func() {
			wait.Add(1)
			client.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
				wait.Done()
			})
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(value)))
		b.ResetTimer()
		start := time.Now()
		if perTxn == 0 {
			for range b.N {
				produce()
			}
			wait.Wait()
		} else {
			for produced := 0; produced < b.N; {
				if err := client.BeginTransaction(); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < perTxn && produced < b.N; i++ {
					produce()
					produced++
				}
				if err := client.EndTransaction(ctx, kgo.TryCommit); err != nil {
					b.Fatal(err)
				}
			}
			wait.Wait()
		}
		elapsed := time.Since(start)
		b.StopTimer()
		if failed != nil {
			b.Fatal(failed)
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
		if perTxn > 0 {
			b.ReportMetric(float64(b.N)/float64(perTxn)/elapsed.Seconds(), "txns/s")
		}
	}
	b.Run("idempotent", func(b *testing.B) { run(b, 0) })
	b.Run("txn=100", func(b *testing.B) { run(b, 100) })
	b.Run("txn=10000", func(b *testing.B) { run(b, 10_000) })
}
