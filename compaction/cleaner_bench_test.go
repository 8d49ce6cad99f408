package compaction

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/segment"
)

// keyedBatch builds one uncompressed batch of n records with keys drawn from keys and values of
// valueBytes.
func keyedBatch(b *batch.Builder, n, keys, valueBytes int, seq *int) []byte {
	b.Reset(time.UnixMilli(1_700_000_000_000))
	value := make([]byte, valueBytes)
	for i := 0; i < n; i++ {
		*seq++
		b.Add(batch.Record{Key: fmt.Appendf(nil, "key-%d", (*seq*7919)%keys), Value: value})
	}
	return slices.Clone(b.Finish())
}

// dirtyLog writes about size bytes of keyed records into a new log and seals them.
func dirtyLog(b *testing.B, size int64, keys, valueBytes int) *segment.Log {
	cfg := segment.DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	l, err := segment.Open(b.TempDir(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	var builder batch.Builder
	seq := 0
	for l.Size() < size {
		if _, err := l.Append(keyedBatch(&builder, 16, keys, valueBytes, &seq), 1); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkClean measures one cleaning pass over 32 MiB of dirty log (its bytes per second are the
// cleaner's throughput in MB of dirty log cleaned), unthrottled.
func BenchmarkClean(b *testing.B) {
	for _, c := range []struct {
		name             string
		keys, valueBytes int
	}{{"100B-values-10k-keys", 10_000, 100}, {"1KiB-values-1k-keys", 1000, 1024}} {
		b.Run(c.name, func(b *testing.B) {
			cleaner := newTestCleaner(b, 32<<20)
			policy := DefaultPolicy()
			b.ReportAllocs()
			var dirty, reclaimed int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				l := dirtyLog(b, 32<<20, c.keys, c.valueBytes)
				dirty = l.Size()
				b.StartTimer()
				stats, err := cleaner.Clean(context.Background(), l, policy, time.Now(), math.MaxInt64)
				if err != nil || !stats.Cleaned {
					b.Fatalf("%+v, %v", stats, err)
				}
				b.StopTimer()
				reclaimed = stats.Reclaimed()
				l.Close()
				b.StartTimer()
			}
			b.SetBytes(dirty)
			b.ReportMetric(float64(reclaimed)/float64(dirty), "reclaimed/dirty")
		})
	}
}

// BenchmarkAppendWhileCleaning measures Log.Append latency (16 records of 1 KiB over 1,000 keys per
// batch, page cache only) with and without the cleaner compacting the same log without pause: the
// p99 is what produce requests pay for the log's own work while the cleaner runs.
func BenchmarkAppendWhileCleaning(b *testing.B) {
	for _, cleaning := range []bool{false, true} {
		b.Run(fmt.Sprintf("cleaning=%v", cleaning), func(b *testing.B) {
			cfg := segment.DefaultConfig()
			cfg.SegmentBytes = 1 << 20
			l, err := segment.Open(b.TempDir(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			var stop atomic.Bool
			var wg sync.WaitGroup
			var passes int
			if cleaning {
				cleaner := newTestCleaner(b, 8<<20)
				policy := DefaultPolicy()
				policy.MinCleanableDirtyRatio = 0
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						if stats, err := cleaner.Clean(context.Background(), l, policy, time.Now(), math.MaxInt64); err == nil && stats.Cleaned {
							passes++
						}
					}
				}()
			}
			var builder batch.Builder
			seq := 0
			raw := make([][]byte, 64)
			for i := range raw {
				raw[i] = keyedBatch(&builder, 16, 1000, 1024, &seq)
			}
			latencies := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(len(raw[0])))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				buf := slices.Clone(raw[i%len(raw)])
				start := time.Now()
				if _, err := l.Append(buf, 1); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
			}
			b.StopTimer()
			stop.Store(true)
			wg.Wait()
			slices.Sort(latencies)
			b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds()), "max-µs")
			b.ReportMetric(float64(passes), "passes")
		})
	}
}
