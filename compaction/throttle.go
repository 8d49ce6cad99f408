package compaction

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Throttle bounds the cleaner's disk I/O to a rate in bytes per second, shared by every log the
// cleaner works on (Kafka's log.cleaner.io.max.bytes.per.second). A rate of 0 or less is no limit.
// It is a token bucket holding at most one second of bytes.
type Throttle struct {
	rate  int64
	clock func() time.Time
	// throttled sums the waits the throttle imposed (sluice_cleaner_throttled_seconds_total).
	throttled atomic.Int64
	mu        struct {
		sync.Mutex
		tokens float64
		last   time.Time
	}
}

// NewThrottle makes a throttle of bytesPerSecond.
func NewThrottle(bytesPerSecond int64) *Throttle {
	t := &Throttle{rate: bytesPerSecond, clock: time.Now}
	t.mu.last = t.clock()
	t.mu.tokens = float64(bytesPerSecond)
	return t
}

// delay takes n bytes from the bucket and returns how long the caller must wait before using them.
func (t *Throttle) delay(n int) time.Duration {
	if t == nil || t.rate <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	t.mu.tokens = min(t.mu.tokens+now.Sub(t.mu.last).Seconds()*float64(t.rate), float64(t.rate))
	t.mu.last = now
	t.mu.tokens -= float64(n)
	if t.mu.tokens >= 0 {
		return 0
	}
	wait := time.Duration(-t.mu.tokens / float64(t.rate) * float64(time.Second))
	t.throttled.Add(int64(wait))
	return wait
}

// Throttled returns the total time callers were told to wait (nil throttle: 0).
func (t *Throttle) Throttled() time.Duration {
	if t == nil {
		return 0
	}
	return time.Duration(t.throttled.Load())
}

// Wait blocks until n more bytes of I/O fit within the rate, or ctx ends.
func (t *Throttle) Wait(ctx context.Context, n int) error {
	d := t.delay(n)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
