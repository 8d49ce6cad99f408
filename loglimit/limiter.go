package loglimit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter passes at most Burst log lines per Interval to Logger (a fixed window).
type Limiter struct {
	logger   *slog.Logger
	interval time.Duration
	burst    int
	now      func() time.Time

	mu struct {
		sync.Mutex
		windowStart time.Time
		passed      int // lines passed in the current window
		suppressed  int // lines dropped since the last line passed
	}
}

// DefaultInterval and DefaultBurst are what sluice uses for lines a peer can trigger at will.
const (
	DefaultInterval = 10 * time.Second
	DefaultBurst    = 5
)

// New returns a Limiter writing to logger (nil discards). An interval or burst below 1 takes the
// default.
func New(logger *slog.Logger, interval time.Duration, burst int) *Limiter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Limiter{logger: logger, interval: interval, burst: burst, now: time.Now}
}

// Warn logs at warning level if the limit allows.
func (l *Limiter) Warn(msg string, args ...any) { l.Log(slog.LevelWarn, msg, args...) }

// Error logs at error level if the limit allows.
func (l *Limiter) Error(msg string, args ...any) { l.Log(slog.LevelError, msg, args...) }

// Log logs at level if the limit allows, adding "suppressed" with the count of lines dropped
// since the previous one passed when that count is not zero.
func (l *Limiter) Log(level slog.Level, msg string, args ...any) {
	if !l.logger.Enabled(context.Background(), level) {
		return
	}
	suppressed, ok := l.admit()
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args[:len(args):len(args)], "suppressed", suppressed)
	}
	l.logger.Log(context.Background(), level, msg, args...)
}

// Suppressed is the number of lines dropped since the last one passed.
func (l *Limiter) Suppressed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.suppressed
}

func (l *Limiter) admit() (suppressed int, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.mu.windowStart) >= l.interval || now.Before(l.mu.windowStart) {
		l.mu.windowStart, l.mu.passed = now, 0
	}
	if l.mu.passed >= l.burst {
		l.mu.suppressed++
		return 0, false
	}
	l.mu.passed++
	suppressed, l.mu.suppressed = l.mu.suppressed, 0
	return suppressed, true
}
