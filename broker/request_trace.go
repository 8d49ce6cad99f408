package broker

// Request tracing with OpenTelemetry, off unless RequestTimingConfig.Tracer is set. A request is
// sampled when its handler starts (a random draw against TraceSampling); only a sampled request
// looks at record headers or makes spans, so tracing costs an unsampled request one draw and
// nothing at all when it is off.
//
// A sampled request becomes, when it completes, a root span named after its API (kind server)
// from its receipt to its last response byte, with one child span per recorded stage (queue,
// append, fsync, replication, send; wait, read, send), all made after the fact from the
// timeline's instants. A produce links its span to the W3C traceparent of each produced record
// that carries one (at most maxTraceLinks); a fetch whose records carry traceparents gets a child
// "consume" span (kind consumer, over the read) linked to them. A trace store then shows publish
// -> Produce (append, fsync, replication, send = the ack) -> Fetch/consume from the producer's
// span. Spans are made on the event loop in the response's done callback: the SDK's batch span
// processor only queues them.

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-mq/sluice/compaction"
	"github.com/sluice-mq/sluice/reqtime"
	"github.com/sluice-mq/sluice/segment"
)

const (
	// maxTraceLinks bounds the links one request's span (or its consume span) carries.
	maxTraceLinks = 16
	// maxTracedBytes bounds the record bytes a sampled request looks through for traceparents
	// (a fetch reads them back from the log; a produce has them in its request).
	maxTracedBytes = 1 << 20
)

// requestTracer samples requests and exports their spans.
type requestTracer struct {
	tracer trace.Tracer
	// A request is sampled when always is set or a uniform draw is below threshold.
	always    bool
	threshold uint64
}

func newRequestTracer(cfg RequestTimingConfig) *requestTracer {
	if cfg.Tracer == nil {
		return nil
	}
	t := &requestTracer{tracer: cfg.Tracer, always: cfg.TraceSampling >= 1}
	if !t.always && cfg.TraceSampling > 0 {
		t.threshold = uint64(cfg.TraceSampling * math.MaxUint64)
	}
	return t
}

func (t *requestTracer) sample() bool {
	return t.always || (t.threshold != 0 && rand.Uint64() < t.threshold)
}

// requestTrace is what a sampled request gathers for its spans besides its timeline. It is
// written by the request's handler before the response is sent and read in the done callback.
type requestTrace struct {
	produced []trace.Link // contexts of produced records
	scanned  int          // produced record bytes looked through, up to maxTracedBytes
	consumed []trace.Link // contexts of fetched records
	attrs    []attribute.KeyValue
}

// traceContext reads a W3C traceparent header value.
func traceContext(traceparent []byte) (trace.SpanContext, bool) {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(traceparent)})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// collectLinks appends to links the contexts of records in raw that carry a traceparent.
func collectLinks(links []trace.Link, raw []byte, topic string, partition int32, withOffset bool) []trace.Link {
	_ = compaction.EachRecordHeader(raw, func(offset int64, key, value []byte) bool {
		if len(links) >= maxTraceLinks {
			return false
		}
		if string(key) != "traceparent" {
			return true
		}
		sc, ok := traceContext(value)
		if !ok {
			return true
		}
		attrs := []attribute.KeyValue{attribute.String("messaging.destination.name", topic), attribute.Int("messaging.destination.partition.id", int(partition))}
		if withOffset {
			attrs = append(attrs, attribute.Int64("messaging.kafka.offset", offset))
		}
		links = append(links, trace.Link{SpanContext: sc, Attributes: attrs})
		return true
	})
	return links
}

// noteProduced records the trace contexts of a produced partition's records. No-op unless sampled.
func (r *request) noteProduced(topic string, partition int32, records []byte) {
	if r.trace == nil {
		return
	}
	destination := attribute.String("messaging.destination.name", topic)
	if !slices.Contains(r.trace.attrs, destination) {
		r.trace.attrs = append(r.trace.attrs, destination)
	}
	if r.trace.scanned+len(records) > maxTracedBytes {
		return // whole batches only: a cut batch fails its CRC
	}
	r.trace.scanned += len(records)
	r.trace.produced = collectLinks(r.trace.produced, records, topic, partition, false)
}

// noteFetched reads back (bounded) the records a consumer fetch returns and records their trace
// contexts. No-op unless sampled.
func (r *request) noteFetched(results []fetchTopicResult) {
	if r.trace == nil {
		return
	}
	budget := int64(maxTracedBytes)
	for _, topic := range results {
		for _, p := range topic.partitions {
			if p.slice.Size == 0 || budget <= 0 || len(r.trace.consumed) >= maxTraceLinks {
				continue
			}
			raw := readSlice(p.slice, budget)
			budget -= int64(len(raw))
			r.trace.consumed = collectLinks(r.trace.consumed, raw, topic.topic, p.partition, true)
		}
	}
}

// readSlice reads up to limit bytes of a fetch's file range (what could be read: a failed read
// only costs the trace its links).
func readSlice(s segment.Slice, limit int64) []byte {
	buf := make([]byte, min(s.Size, limit))
	n, _ := s.File.ReadAt(buf, s.Position)
	return buf[:n]
}

// export makes the request's spans; it runs in the response's done callback.
func (t *requestTracer) export(r *request, done time.Time) {
	rt := r.trace
	attrs := append(rt.attrs,
		attribute.String("messaging.system", "kafka"),
		attribute.Int("kafka.api_version", int(r.header.APIVersion)),
		attribute.String("messaging.client.id", r.clientID()),
		attribute.Int("sluice.request.size_bytes", r.size),
		attribute.Int64("sluice.connection.id", int64(r.session.conn.ID())))
	ctx, span := t.tracer.Start(context.Background(), r.apiName(), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(r.received), trace.WithLinks(rt.produced...), trace.WithAttributes(attrs...))
	for s := range reqtime.StageCount {
		begin, end, ok := r.timeline.Interval(s)
		if !ok {
			continue
		}
		_, stage := t.tracer.Start(ctx, s.String(), trace.WithTimestamp(begin))
		stage.End(trace.WithTimestamp(end))
	}
	if len(rt.consumed) > 0 {
		begin, end, _ := r.timeline.Interval(reqtime.Read)
		_, consume := t.tracer.Start(ctx, "consume", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(begin), trace.WithLinks(rt.consumed...))
		consume.End(trace.WithTimestamp(end))
	}
	if r.hadErrors.Load() {
		span.SetStatus(codes.Error, "the response carries an error code")
	}
	span.End(trace.WithTimestamp(done))
}
