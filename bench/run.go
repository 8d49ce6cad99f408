package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/bench/histogram"
)

// Interval is one second of a run as one process saw it, or (merged) as all agents did.
// Latencies are microseconds.
type Interval struct {
	Second         int   `json:"second"` // since the run started, warm-up included
	Warmup         bool  `json:"warmup"`
	Published      int64 `json:"published"` // acknowledged in this second
	PublishedBytes int64 `json:"published_bytes"`
	PublishErrors  int64 `json:"publish_errors"`
	Consumed       int64 `json:"consumed"`
	ConsumedBytes  int64 `json:"consumed_bytes"`
	// TotalPublished and TotalConsumed count from the start of the run, for the backlog.
	TotalPublished  int64                `json:"total_published"`
	TotalConsumed   int64                `json:"total_consumed"`
	Backlog         int64                `json:"backlog"` // records published and not yet consumed, summed over groups
	PublishLatency  *histogram.Histogram `json:"publish_latency_us"`
	EndToEndLatency *histogram.Histogram `json:"end_to_end_latency_us"`
}

// recorder collects what producers and consumers report. Callbacks of several clients call it at
// once; one mutex guards both the histograms and the counters, which keeps an interval's counts
// and latencies consistent with each other.
type recorder struct {
	mu struct {
		sync.Mutex
		interval Interval             // the second being filled
		measured bool                 // past the warm-up: totals count
		totals   Interval             // the measured window
		timeline []Interval           // closed seconds
		publish  *histogram.Histogram // measured window
		endToEnd *histogram.Histogram
	}
}

func newRecorder() *recorder {
	r := &recorder{}
	r.mu.interval = Interval{PublishLatency: histogram.New(), EndToEndLatency: histogram.New(), Warmup: true}
	r.mu.publish, r.mu.endToEnd = histogram.New(), histogram.New()
	return r
}

func (r *recorder) published(latency time.Duration, bytes int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.mu.interval.PublishErrors++
		if r.mu.measured {
			r.mu.totals.PublishErrors++
		}
		return
	}
	us := latency.Microseconds()
	r.mu.interval.Published++
	r.mu.interval.PublishedBytes += int64(bytes)
	r.mu.interval.TotalPublished++
	r.mu.interval.PublishLatency.Record(us)
	if r.mu.measured {
		r.mu.totals.Published++
		r.mu.totals.PublishedBytes += int64(bytes)
		r.mu.publish.Record(us)
	}
}

func (r *recorder) consumed(value []byte, now time.Time) {
	sent, ok := stampOf(value)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.interval.Consumed++
	r.mu.interval.ConsumedBytes += int64(len(value))
	r.mu.interval.TotalConsumed++
	us := now.Sub(sent).Microseconds()
	if ok {
		r.mu.interval.EndToEndLatency.Record(us)
	}
	if r.mu.measured {
		r.mu.totals.Consumed++
		r.mu.totals.ConsumedBytes += int64(len(value))
		if ok {
			r.mu.endToEnd.Record(us)
		}
	}
}

// tick closes the current second and returns it.
func (r *recorder) tick(second int, groups int) Interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	closed := r.mu.interval
	closed.Second = second
	closed.Backlog = closed.TotalPublished*int64(groups) - closed.TotalConsumed
	r.mu.timeline = append(r.mu.timeline, closed)
	r.mu.interval = Interval{
		PublishLatency: histogram.New(), EndToEndLatency: histogram.New(), Warmup: !r.mu.measured,
		TotalPublished: closed.TotalPublished, TotalConsumed: closed.TotalConsumed,
	}
	return closed
}

// startMeasuring ends the warm-up: from now on totals count.
func (r *recorder) startMeasuring() {
	r.mu.Lock()
	r.mu.measured = true
	r.mu.interval.Warmup = false
	r.mu.Unlock()
}

func (r *recorder) stopMeasuring() {
	r.mu.Lock()
	r.mu.measured = false
	r.mu.Unlock()
}

// Progress is called once a second with the second just closed.
type Progress func(Interval)

// Execute runs plan in this process for its warm-up and duration, calling progress each second,
// and returns this process's result. Topics must exist.
func Execute(ctx context.Context, plan Plan, progress Progress) (*Result, error) {
	w := plan.Workload
	driver, err := NewDriver(plan.Driver, plan.Brokers, plan.TLS)
	if err != nil {
		return nil, err
	}
	defer driver.Close()
	rec := newRecorder()

	// Consumers first. Each joins its group, which has nothing committed on the fresh topics, so
	// every partition starts at its log start and the group sees every record. Producers start
	// (and the run's clock with them) once every consumer here has partitions: the join and the
	// rebalances that follow it are then not counted in end-to-end latency.
	var consumers []Consumer
	closeConsumers := func() error {
		var errs []error
		for _, c := range consumers {
			errs = append(errs, c.Close())
		}
		consumers = nil
		return errors.Join(errs...)
	}
	defer closeConsumers()
	for _, slot := range plan.Consumers {
		topic := plan.Topics[slot.Topic]
		c, err := driver.NewConsumer(ctx, topic, GroupID(topic, slot.Group), rec.consumed)
		if err != nil {
			return nil, fmt.Errorf("bench: consumer of %s: %w", topic, err)
		}
		consumers = append(consumers, c)
	}
	if err := awaitAssigned(ctx, consumers, consumerJoinTimeout); err != nil {
		return nil, err
	}
	started := time.Now()

	produceCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	var producing sync.WaitGroup
	var producers []Producer
	var sendErr atomic.Pointer[error]
	payload := make([]byte, 1<<16+w.MessageSize)
	rand.Read(payload) // incompressible, so compression cannot flatter the figures
	keys := make([][]byte, 0, w.KeyCount)
	if w.Keys == "random" {
		for range w.KeyCount {
			key := make([]byte, 16)
			rand.Read(key)
			keys = append(keys, key)
		}
	}
	rate := plan.ratePerProducer()
	for index, topic := range plan.Producers {
		p, err := driver.NewProducer(ctx, w, func(sent time.Time, err error) { rec.published(time.Since(sent), w.MessageSize, err) })
		if err != nil {
			stopProducing()
			producing.Wait()
			return nil, fmt.Errorf("bench: producer: %w", err)
		}
		producers = append(producers, p)
		producing.Add(1)
		go func() {
			defer producing.Done()
			err := produceLoop(produceCtx, p, plan.Topics[topic], w.MessageSize, rate, payload, keys, uint64(index), rec)
			if err != nil && produceCtx.Err() == nil {
				sendErr.Store(&err)
				stopProducing()
			}
		}()
	}

	measureFrom := started.Add(w.Warmup)
	end := measureFrom.Add(w.Duration)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	second := 0
	measuring := w.Warmup == 0
	if measuring {
		rec.startMeasuring()
	}
	var runErr error
loop:
	for {
		var timer <-chan time.Time
		if !measuring {
			timer = time.After(time.Until(measureFrom))
		}
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
			break loop
		case <-produceCtx.Done():
			if p := sendErr.Load(); p != nil {
				runErr = *p
			}
			break loop
		case <-timer:
			rec.startMeasuring()
			measuring = true
		case now := <-ticker.C:
			second++
			interval := rec.tick(second, w.ConsumerGroups)
			if progress != nil {
				progress(interval)
			}
			if !now.Before(end) {
				break loop
			}
		}
	}
	rec.stopMeasuring()
	measuredSeconds := time.Since(measureFrom).Seconds()
	stopProducing()
	producing.Wait()
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range producers {
		p.Close(closeCtx) // records still unacknowledged fail: they are outside the window anyway
	}
	consumerErr := closeConsumers()
	if runErr != nil {
		return nil, runErr
	}
	if consumerErr != nil {
		return nil, consumerErr
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	result := &Result{
		Workload: w, Driver: plan.Driver, Brokers: plan.Brokers, Topics: plan.Topics, Started: started,
		MeasuredSeconds: measuredSeconds,
		Published:       rec.mu.totals.Published,
		PublishedBytes:  rec.mu.totals.PublishedBytes,
		PublishErrors:   rec.mu.totals.PublishErrors,
		Consumed:        rec.mu.totals.Consumed,
		ConsumedBytes:   rec.mu.totals.ConsumedBytes,
		PublishLatency:  rec.mu.publish,
		EndToEndLatency: rec.mu.endToEnd,
		Timeline:        rec.mu.timeline,
		Producers:       len(plan.Producers),
		Consumers:       len(plan.Consumers),
		TotalPublished:  rec.mu.interval.TotalPublished,
		TotalConsumed:   rec.mu.interval.TotalConsumed,
		BacklogAtEnd:    rec.mu.interval.TotalPublished*int64(w.ConsumerGroups) - rec.mu.interval.TotalConsumed,
	}
	if w.ConsumerGroups == 0 {
		result.BacklogAtEnd = 0
	}
	result.Summarize()
	return result, nil
}

// consumerJoinTimeout bounds the wait for every consumer to be given partitions. Joining takes the
// broker's initial rebalance delay and, per member that joins later, a heartbeat or two.
const consumerJoinTimeout = 30 * time.Second

// awaitAssigned waits until each consumer has partitions, or fails after timeout.
func awaitAssigned(ctx context.Context, consumers []Consumer, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for i, c := range consumers {
		select {
		case <-c.Assigned():
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			waiting := 0
			for _, c := range consumers[i:] {
				select {
				case <-c.Assigned():
				default:
					waiting++
				}
			}
			return fmt.Errorf("bench: %d of %d consumers were given no partitions by their group within %v", waiting, len(consumers), timeout)
		}
	}
	return nil
}

// produceLoop sends records until ctx ends. With a rate, record i is due at start + i/rate and its
// latencies count from that due time, not from when Send got to it: a stall in the client or
// broker then shows as latency instead of silently lowering the rate (coordinated omission).
//
// A record due less than sendAhead after the last clock reading is sent at once, and its latencies
// count from that reading, which is before the send. Go's timers wake about a millisecond late on an
// idle thread here (time.Sleep of 5 µs to 500 µs took 1.13 ms at the median), so sleeping until
// each due time added the generator's own oversleep, 0.6 ms on average, to every record's latency.
// Sending up to sendAhead early keeps the rate and, counting from the clock, neither flatters nor
// charges the system under test for the generator's timer.
const (
	valueSlabBytes = 64 << 10 // the slab produceLoop cuts record values from
	clockReadEvery = 8        // at full speed, records per clock reading (a few µs apart)
	sendAhead      = time.Millisecond
)

func produceLoop(ctx context.Context, p Producer, topic string, size int, rate float64, payload []byte, keys [][]byte, seed uint64, rec *recorder) error {
	random := mathrand.New(mathrand.NewPCG(seed, uint64(time.Now().UnixNano())))
	start := time.Now()
	var sent int64
	var slab []byte
	// now is the last clock reading. Readings were a tenth of the generator's CPU
	// (kvm-clock), so behind schedule (or at full speed) the loop reads the clock only when the
	// schedule passes the last reading, or every clockReadEvery records.
	var now time.Time
	for ctx.Err() == nil {
		var due time.Time
		if rate <= 0 {
			if sent%clockReadEvery == 0 {
				now = time.Now()
			}
			due = now
		} else if due = start.Add(time.Duration(float64(sent) / rate * float64(time.Second))); due.After(now.Add(sendAhead)) {
			now = time.Now()
			if wait := due.Sub(now) - sendAhead; wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					timer.Stop()
					return nil
				case <-timer.C:
				}
				now = time.Now()
			}
		}
		if due.After(now) {
			due = now // sent ahead of schedule: count from the clock, read before this send
		}
		// Values are carved from a slab: one allocation per slab instead of one per record.
		if len(slab) < size {
			slab = make([]byte, max(valueSlabBytes, size))
		}
		value := slab[:size:size]
		slab = slab[size:]
		offset := random.IntN(len(payload) - size)
		copy(value, payload[offset:offset+size])
		stamp(value, due)
		var key []byte
		if len(keys) > 0 {
			key = keys[random.IntN(len(keys))]
		}
		err := p.Send(ctx, topic, key, value, due)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("bench: send to %s: %w", topic, err)
		}
		sent++
	}
	return nil
}
