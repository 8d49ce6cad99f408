package segment

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// eventLineInterval is the least time between two log lines about the same repeated event of one
// log (appends failing for want of space, reads finding damage); the lines held back in between are
// counted in the next one.
const eventLineInterval = 30 * time.Second

// rateLimitedLine lets one log line through per eventLineInterval and counts the others.
type rateLimitedLine struct {
	mu struct {
		sync.Mutex
		last       time.Time // when the last line went out; zero before the first
		suppressed int       // events since then that got no line
	}
}

// allow reports whether a line may go out now and, if so, how many events were held back before it.
func (r *rateLimitedLine) allow(now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mu.last.IsZero() && now.Sub(r.mu.last) < eventLineInterval {
		r.mu.suppressed++
		return false, 0
	}
	held := r.mu.suppressed
	r.mu.last, r.mu.suppressed = now, 0
	return true, held
}

// noteDiskFull logs an append that failed because the disk is full: the producer gets the error,
// but the operator must hear of it too.
func (l *Log) noteDiskFull(err error, cfg *Config) {
	if !errors.Is(err, unix.ENOSPC) {
		return
	}
	l.outOfSpace.Store(true)
	if ok, held := l.diskFull.allow(cfg.now()); ok {
		cfg.logger().Error("segment: append failed, disk full; the log takes appends again once there is space",
			"dir", l.dir, "err", err, "repeats_not_logged", held)
	}
}

// noteReadCorrupt logs a read that found damaged data.
func (l *Log) noteReadCorrupt(err error) {
	cfg := l.config.Load()
	if ok, held := l.readCorrupt.allow(cfg.now()); ok {
		cfg.logger().Error("segment: read of damaged data refused", "dir", l.dir, "err", err, "repeats_not_logged", held)
	}
}

func (c *Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}
