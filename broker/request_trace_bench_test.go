package broker

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-mq/sluice/batch"
)

// processCPU is the process's user and system CPU time so far: on a shared machine the CPU a
// request costs varies far less than its wall-clock time.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// BenchmarkProduceTracing measures the broker's produce path (acks=1, one connection, 32 requests
// in flight, 16 records of 100 bytes per request, each record with a traceparent header) with
// tracing off, on at sampling 0, 1% and 100% (spans go through the SDK's batch processor to an
// exporter that drops them). allocs/op, B/op and cpu-ns/op are the whole process's (broker and
// client) per request.
func BenchmarkProduceTracing(b *testing.B) {
	var builder batch.Builder
	builder.Reset(batchTime)
	value := make([]byte, 100)
	for range 16 {
		builder.Add(batch.Record{Value: value, Headers: []batch.RecordHeader{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}})
	}
	records := builder.Finish()
	for _, sampling := range []float64{-1, 0, 0.01, 1} {
		name := "off"
		if sampling >= 0 {
			name = fmt.Sprintf("sampling=%g", sampling)
		}
		b.Run(name, func(b *testing.B) {
			provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			defer provider.Shutdown(context.Background())
			broker := startBroker(b, func(cfg *Config) {
				cfg.Logger = slog.New(slog.DiscardHandler)
				if sampling >= 0 {
					cfg.RequestTiming.Tracer = provider.Tracer("bench")
					cfg.RequestTiming.TraceSampling = sampling
				}
			})
			c := dial(b, broker)
			c.createTopic("bench", 1, nil)
			_ = c.conn.SetDeadline(time.Now().Add(10 * time.Minute))
			const window = 32
			correlations := make([]int32, 0, window)
			b.ReportAllocs()
			b.SetBytes(int64(len(records)))
			b.ResetTimer()
			cpuBefore := processCPU()
			for sent := 0; sent < b.N; {
				correlations = correlations[:0]
				for ; len(correlations) < window && sent < b.N; sent++ {
					correlations = append(correlations, c.send(produceRequest(9, 1, "bench", 0, records)))
				}
				for _, correlation := range correlations {
					c.receive(produceRequest(9, 1, "bench", 0, nil), correlation)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpuBefore)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N*16)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
