package broker

// Request tracing against franz-go over a real socket: a record produced with a W3C traceparent
// header and consumed again yields a Produce span linked to the producer's span with every
// produce stage as a child, and a Fetch span whose consume child links to the same producer span.

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// childrenOf lists the names of spans whose parent is parent.
func childrenOf(spans []sdktrace.ReadOnlySpan, parent trace.SpanContext) map[string]sdktrace.ReadOnlySpan {
	children := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.Parent().SpanID() == parent.SpanID() && s.Parent().TraceID() == parent.TraceID() {
			children[s.Name()] = s
		}
	}
	return children
}

func linksTo(s sdktrace.ReadOnlySpan, target trace.SpanContext) bool {
	return slices.ContainsFunc(s.Links(), func(l sdktrace.Link) bool {
		return l.SpanContext.TraceID() == target.TraceID() && l.SpanContext.SpanID() == target.SpanID()
	})
}

func TestTracePublishToConsume(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { _ = provider.Shutdown(groupTestContext(t)) })
	set := metrics.NewSet()
	b := startBroker(t, func(cfg *Config) {
		cfg.Metrics = set
		cfg.RequestTiming.Tracer = provider.Tracer("sluice-broker")
		cfg.RequestTiming.TraceSampling = 1
	})
	const topic = "traced"
	dial(t, b).createTopic(topic, 1, nil)
	ctx := groupTestContext(t)

	// The application's publish span, its context carried in the record as traceparent.
	publishCtx, publish := provider.Tracer("test-producer").Start(ctx, "publish "+topic)
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(publishCtx, carrier)
	producer := franzClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	record := &kgo.Record{Value: []byte("traced value"), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(carrier.Get("traceparent"))}}}
	if err := producer.ProduceSync(ctx, record).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	publish.End()
	publisher := publish.SpanContext()

	consumer := franzClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := false; !got; {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = got || bytes.Equal(r.Value, record.Value) })
	}

	// Spans are made when a response's last byte left, which may trail the client's receipt.
	var produce, fetch sdktrace.ReadOnlySpan
	await(t, "the Produce span and a Fetch span with a consume child", func() bool {
		spans := recorder.Ended()
		produce, fetch = nil, nil
		for _, s := range spans {
			switch {
			case s.Name() == "Produce" && linksTo(s, publisher):
				produce = s
			case s.Name() == "Fetch":
				if consume, ok := childrenOf(spans, s.SpanContext())["consume"]; ok && linksTo(consume, publisher) {
					fetch = s
				}
			}
		}
		return produce != nil && fetch != nil
	})
	spans := recorder.Ended()
	if produce.Parent().IsValid() || produce.SpanKind() != trace.SpanKindServer {
		t.Errorf("Produce span: parent %v kind %v; want a root server span linked to the publisher", produce.Parent(), produce.SpanKind())
	}
	checkStages := func(parent sdktrace.ReadOnlySpan, want ...string) {
		t.Helper()
		children := childrenOf(spans, parent.SpanContext())
		for _, name := range want {
			child, ok := children[name]
			if !ok {
				t.Errorf("%s span has no %q child (children: %v)", parent.Name(), name, slices.Sorted(mapKeys(children)))
				continue
			}
			if child.StartTime().Before(parent.StartTime()) || child.EndTime().After(parent.EndTime()) || child.EndTime().Before(child.StartTime()) {
				t.Errorf("%s/%s [%v, %v] outside its parent [%v, %v]", parent.Name(), name, child.StartTime(), child.EndTime(), parent.StartTime(), parent.EndTime())
			}
		}
	}
	checkStages(produce, "queue", "append", "fsync", "replication", "send")
	checkStages(fetch, "queue", "wait", "read", "send", "consume")
	// publish -> Produce stages in order: each starts where the one before ended, or later.
	children := childrenOf(spans, produce.SpanContext())
	for i, name := range []string{"queue", "append", "fsync", "replication", "send"}[1:] {
		before := []string{"queue", "append", "fsync", "replication"}[i]
		if children[name].StartTime().Before(children[before].EndTime()) {
			t.Errorf("produce stage %s starts before %s ends", name, before)
		}
	}

	// The same requests fed the stage and size histograms.
	var exposition strings.Builder
	set.WritePrometheus(&exposition)
	for _, series := range []string{
		`sluice_produce_stage_seconds_count{stage="fsync"}`, `sluice_produce_stage_seconds_count{stage="replication"}`,
		`sluice_produce_stage_seconds_count{stage="send"}`, `sluice_fetch_stage_seconds_count{stage="wait"}`,
		`sluice_fetch_stage_seconds_count{stage="read"}`, `sluice_request_size_bytes_count{api="Produce"}`,
	} {
		if !strings.Contains(exposition.String(), series+" ") {
			t.Errorf("metrics lack %s", series)
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestTraceSamplingZeroMakesNoSpans: with a tracer but ratio 0 no request is traced.
func TestTraceSamplingZeroMakesNoSpans(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	b := startBroker(t, func(cfg *Config) {
		cfg.RequestTiming.Tracer = provider.Tracer("sluice-broker")
		cfg.RequestTiming.TraceSampling = 0
	})
	c := dial(t, b)
	c.createTopic("untraced", 1, nil)
	c.mustProduce("untraced", 0, recordBatch(batchTime, "a"))
	if n := len(recorder.Ended()); n != 0 {
		t.Fatalf("%d spans exported at sampling 0", n)
	}
	if r := newRequestTracer(RequestTimingConfig{Tracer: provider.Tracer("x"), TraceSampling: 0.5}); !sampledAbout(r, 0.5) {
		t.Error("sampling 0.5 is not near half")
	}
}

// sampledAbout draws many times and checks the sampled share is within a wide band of ratio.
func sampledAbout(r *requestTracer, ratio float64) bool {
	const draws = 100000
	sampled := 0
	for range draws {
		if r.sample() {
			sampled++
		}
	}
	share := float64(sampled) / draws
	return share > ratio-0.02 && share < ratio+0.02
}
