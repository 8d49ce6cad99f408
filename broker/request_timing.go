package broker

// Per-request stage timings (package reqtime): every request carries a Timeline in its request
// value. The handlers mark the stages they pass (produce: append, fsync, replication; fetch: wait,
// read); api.go marks the queue wait and the send. When the response's last byte has left (or an
// acks=0 produce is skipped) the request completes: its stages go into the stage histograms, a
// request slower than RequestTimingConfig.SlowRequest logs one line, and a sampled request becomes
// a trace (request_trace.go). Nothing here allocates for an unsampled request: the request value
// itself is the response's netpoll.Notifier, so no done callback is allocated either.
//
// Metrics (histograms, seconds and bytes):
//
//	sluice_produce_stage_seconds{stage="queue|append|fsync|replication|send"}
//	sluice_fetch_stage_seconds{stage="wait|read|send"}   consumers' fetches (not followers')
//	sluice_request_size_bytes{api="Produce"|...}         request frames, per API (metrics.go)

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/loglimit"
	"github.com/sluice-mq/sluice/replication"
	"github.com/sluice-mq/sluice/reqtime"
	"go.opentelemetry.io/otel/trace"
)

// RequestTimingConfig configures the slow-request log and request tracing.
type RequestTimingConfig struct {
	// SlowRequest: a request taking at least this long from receipt to its last response byte
	// logs one warning line with its stage timings (at most loglimit's default burst per
	// interval); 0 turns the log off.
	SlowRequest time.Duration
	// Tracer receives one span per sampled request, with its stages as child spans
	// (request_trace.go). Nil turns tracing off: then no request parses record headers or
	// creates a span.
	Tracer trace.Tracer
	// TraceSampling is the fraction of requests traced when Tracer is set, in [0, 1].
	TraceSampling float64
}

// DefaultRequestTimingConfig logs requests slower than a second and traces nothing.
func DefaultRequestTimingConfig() RequestTimingConfig {
	return RequestTimingConfig{SlowRequest: time.Second}
}

// Validate reports unusable settings.
func (c RequestTimingConfig) Validate() error {
	var errs []error
	if c.SlowRequest < 0 {
		errs = append(errs, fmt.Errorf("slow request threshold %v is negative", c.SlowRequest))
	}
	if !(c.TraceSampling >= 0 && c.TraceSampling <= 1) {
		errs = append(errs, fmt.Errorf("trace sampling ratio %v outside [0, 1]", c.TraceSampling))
	}
	return errors.Join(errs...)
}

// requestTiming turns completed requests' timelines into histograms, slow-request lines and traces.
type requestTiming struct {
	// produceStages and fetchStages hold a histogram for each exported stage, nil elsewhere.
	produceStages [reqtime.StageCount]*metrics.Histogram
	fetchStages   [reqtime.StageCount]*metrics.Histogram
	slowRequest   time.Duration
	slowLog       *loglimit.Limiter
	tracer        *requestTracer // nil: tracing off
}

func newRequestTiming(cfg RequestTimingConfig, set *metrics.Set, slowLog *loglimit.Limiter) *requestTiming {
	t := &requestTiming{slowRequest: cfg.SlowRequest, slowLog: slowLog, tracer: newRequestTracer(cfg)}
	for _, s := range reqtime.ProduceStages {
		t.produceStages[s] = set.NewHistogram(fmt.Sprintf(`sluice_produce_stage_seconds{stage=%q}`, s))
	}
	for _, s := range reqtime.FetchStages {
		if s != reqtime.Queue { // a fetch's queue wait is in its trace and slow-log line only
			t.fetchStages[s] = set.NewHistogram(fmt.Sprintf(`sluice_fetch_stage_seconds{stage=%q}`, s))
		}
	}
	return t
}

// begin starts a request's timeline when its handler starts; it runs on the connection's worker.
func (t *requestTiming) begin(r *request, frameBytes int) {
	r.timeline.Received = r.received
	r.timeline.Record(reqtime.Queue, r.received, time.Now())
	r.metrics.sizeBytes.Update(float64(frameBytes))
	r.size = frameBytes
	if t.tracer != nil && t.tracer.sample() {
		r.trace = &requestTrace{}
	}
}

// started is when the request's handler started.
func (r *request) started() time.Time {
	_, end, _ := r.timeline.Interval(reqtime.Queue)
	return end
}

// markAppended records a produce's append stage: handler start until its batches are in the logs.
func (r *request) markAppended() {
	r.timeline.Record(reqtime.Append, r.started(), time.Now())
}

// markRead records a fetch's wait (handler start until r.readBegun, the start of the read that
// answers it) and read (until now, the response framed and about to be sent).
func (r *request) markRead() {
	if r.readBegun.IsZero() {
		return // answered without reading (a refused fetch session)
	}
	r.timeline.Record(reqtime.Wait, r.started(), r.readBegun)
	r.timeline.Record(reqtime.Read, r.readBegun, time.Now())
}

// produceFsyncWatch times the local fdatasync of an acks=-1 produce's batches: the Fsync stage
// ends when the last of its partitions' logs has them on disk.
type produceFsyncWatch struct {
	mu        sync.Mutex
	remaining int       // partitions whose fsync is pending
	fsynced   time.Time // zero until remaining reached 0
}

// watchFsync returns a watch for n partitions' fsyncs, or nil when acks=-1 does not wait for the
// leader's fsync (replica acks in memory, or the chaos suite's broken build), so that the watch
// never asks for an fsync the broker would not have done.
func (b *Broker) watchFsync(n int) *produceFsyncWatch {
	if b.config.Replication.AckMode != replication.AckFsync || b.config.Replication.UnsafeLeaderOnlyAck {
		return nil
	}
	return &produceFsyncWatch{remaining: n}
}

// flushed is the log's NotifyFlushed callback; it runs on the flusher and must not block.
func (w *produceFsyncWatch) flushed(error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.remaining--; w.remaining == 0 {
		w.fsynced = now
	}
}

// markAcked records an acks=-1 produce's fsync and replication stages when it is answered
// (acknowledged, failed or timed out): fsync from the append's end to the last local fsync,
// replication from there (or from the append's end without a watch) to the answer.
func (r *request) markAcked(w *produceFsyncWatch) {
	now := time.Now()
	_, waitBegin, ok := r.timeline.Interval(reqtime.Append)
	if !ok {
		waitBegin = r.started()
	}
	if w != nil {
		w.mu.Lock()
		fsynced := w.fsynced
		w.mu.Unlock()
		if fsynced.IsZero() || fsynced.After(now) {
			fsynced = now // answered before the fsync was seen (timeout, failure)
		}
		r.timeline.Record(reqtime.Fsync, waitBegin, fsynced)
		waitBegin = fsynced
	}
	r.timeline.Record(reqtime.Replication, waitBegin, now)
}

// ResponseDone implements netpoll.Notifier: it runs on the event loop once the response's last
// byte left (or the connection closed), so it must not block.
func (r *request) ResponseDone(error) {
	done := time.Now()
	r.timeline.Record(reqtime.Send, r.sendBegun, done)
	r.session.broker.timing.complete(r, done)
}

// complete observes a finished request.
func (t *requestTiming) complete(r *request, done time.Time) {
	var stages *[reqtime.StageCount]*metrics.Histogram
	switch {
	case r.header.APIKey == produceAPIKey:
		stages = &t.produceStages
	case r.header.APIKey == fetchAPIKey && !r.followerFetch:
		stages = &t.fetchStages
	}
	if stages != nil {
		for s, h := range stages {
			if d, ok := r.timeline.Duration(reqtime.Stage(s)); ok && h != nil {
				h.Update(d.Seconds())
			}
		}
	}
	total := done.Sub(r.received)
	if t.slowRequest > 0 && total >= t.slowRequest {
		// Rate-limited, so at most a few lines per interval block the event loop on the log.
		t.slowLog.Warn("slow request", "api", r.apiName(), "version", r.header.APIVersion,
			"client_id", r.clientID(), "connection", r.session.conn.ID(), "remote", r.session.conn.RemoteAddr().String(),
			"correlation_id", r.header.CorrelationID, "size_bytes", r.size, "total", total, "failed", r.hadErrors.Load(),
			"stages", r.timeline)
	}
	if r.trace != nil {
		t.tracer.export(r, done)
	}
}

const (
	produceAPIKey int16 = 0
	fetchAPIKey   int16 = 1
)

func (r *request) apiName() string { return kmsg.NameForKey(r.header.APIKey) }

func (r *request) clientID() string {
	if r.header.ClientID == nil {
		return ""
	}
	return *r.header.ClientID
}
