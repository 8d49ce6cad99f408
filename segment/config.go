package segment

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// FlushPolicy decides when the log fsyncs on its own. Whatever the policy, a caller that waits for
// an offset to be flushed (acks=all) makes the log fsync up to it.
type FlushPolicy int

const (
	// FlushByOS leaves writeback to the kernel; the log fsyncs only on roll, close and request.
	FlushByOS FlushPolicy = iota
	// FlushOnAppend fsyncs after appends, as group commit: one fdatasync covers every append that
	// arrived before it.
	FlushOnAppend
	// FlushOnInterval fsyncs every Config.FlushInterval when there is unflushed data.
	FlushOnInterval
)

func (p FlushPolicy) String() string {
	switch p {
	case FlushByOS:
		return "os"
	case FlushOnAppend:
		return "append"
	case FlushOnInterval:
		return "interval"
	}
	return fmt.Sprintf("FlushPolicy(%d)", int(p))
}

// ParseFlushPolicy reads "os", "append" or "interval".
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	for _, p := range []FlushPolicy{FlushByOS, FlushOnAppend, FlushOnInterval} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("segment: unknown flush policy %q (want os, append or interval)", s)
}

// Config configures one log. It may be replaced at runtime with Log.SetConfig.
type Config struct {
	// SegmentBytes is the size a segment rolls at and is preallocated up to. Kafka: segment.bytes.
	SegmentBytes int64
	// SegmentAge rolls a segment whose first append is older than this (0: never). Kafka: segment.ms.
	SegmentAge time.Duration
	// IndexIntervalBytes is the number of bytes of log between two offset index entries.
	IndexIntervalBytes int64
	// MaxIndexEntries bounds each segment's offset and time index; a full index rolls the segment.
	MaxIndexEntries int
	// Preallocate the data file with fallocate, so that appends do not grow the file write by write:
	// from the first append on, in steps of 64 KiB doubling up to PreallocateStep, never past
	// SegmentBytes (the whole segment at the first append when the step is 0).
	Preallocate     bool
	PreallocateStep int64
	// PreallocateRest: a segment that has grown through a whole PreallocateStep (a busy partition)
	// preallocates the rest of the segment at its next step instead, when its filesystem keeps
	// enough free space after it (see reserve). An idle partition still holds little disk.
	PreallocateRest bool
	// Flush policy and, for FlushOnInterval, its period.
	Flush         FlushPolicy
	FlushInterval time.Duration
	// FlushYield: before sampling what an fsync will cover, the flusher yields the processor once
	// (runtime.Gosched), so that in-process appenders the previous fsync just released, and that
	// append again at once, join this fsync (4.0 -> 7.3 appends per fsync in BenchmarkGroupCommit).
	// The yield puts the flusher at the back of the Go scheduler's global run queue: in a busy
	// process it delays the fsync (a broker at 375,000 msg/s: 0.5 ms at p90, 7 ms at p99), and
	// when the appenders are remote (a broker's producers and followers) it lets none of them in.
	FlushYield bool
	// WritebackBytes: under FlushByOS, each time this many bytes have been appended the log's
	// flusher goroutine writes them to disk and waits (sync_file_range, nothing made durable), so
	// that dirty pages do not pile up into one burst of writeback that stalls appends
	// (log_writeback.go). 0 leaves writeback to the kernel alone.
	WritebackBytes int64
	// TailCacheBytes: once the active segment is written back or fsynced up to a position, its
	// cached pages more than this far behind it are dropped from the page cache (log_cache.go).
	// 0 leaves them to the kernel. Invariant: >= 0.
	TailCacheBytes int64
	// RetentionTime deletes sealed segments whose newest timestamp is older (negative: keep forever).
	RetentionTime time.Duration
	// RetentionBytes deletes the oldest sealed segments while the log exceeds it (negative: no limit).
	RetentionBytes int64
	// FileDeleteDelay keeps removed segments open this long for readers still sending from them.
	FileDeleteDelay time.Duration
	// CheckpointInterval bounds how often the recovery point file is rewritten after an fsync.
	CheckpointInterval time.Duration
	// ObserveFsync, when set, is called with the duration of each group-commit fdatasync (metrics).
	ObserveFsync func(time.Duration)
	// Logger receives what the log has to report on its own: damaged data found by recovery, torn
	// tails cut after a crash, appends failing on a full disk and reads refused for damage (the last
	// two at most once per 30 s per log). nil discards them.
	Logger *slog.Logger
	// FsyncFault is a test-only fault hook, nil in production (see fault_hook.go).
	FsyncFault func() error
	// Now is the clock (nil: time.Now); tests set it to drive retention and rolls.
	Now func() time.Time
}

// DefaultConfig returns Kafka's defaults where Kafka has one.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentAge:         7 * 24 * time.Hour,
		IndexIntervalBytes: 4096,
		MaxIndexEntries:    (10 << 20) / 8,
		Preallocate:        true,
		PreallocateStep:    64 << 20,
		PreallocateRest:    true,
		Flush:              FlushByOS,
		FlushInterval:      time.Second,
		FlushYield:         true,
		WritebackBytes:     1 << 20,
		TailCacheBytes:     64 << 20,
		RetentionTime:      7 * 24 * time.Hour,
		RetentionBytes:     -1,
		FileDeleteDelay:    time.Minute,
		CheckpointInterval: time.Second,
	}
}

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	var errs []error
	if c.SegmentBytes < 1024 || c.SegmentBytes > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("segment bytes %d outside [1024, 4 GiB)", c.SegmentBytes))
	}
	if c.IndexIntervalBytes < 1 {
		errs = append(errs, fmt.Errorf("index interval %d must be positive", c.IndexIntervalBytes))
	}
	if c.MaxIndexEntries < 2 {
		errs = append(errs, fmt.Errorf("max index entries %d must be at least 2", c.MaxIndexEntries))
	}
	if c.Flush == FlushOnInterval && c.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("flush interval %v must be positive", c.FlushInterval))
	}
	if c.Flush < FlushByOS || c.Flush > FlushOnInterval {
		errs = append(errs, fmt.Errorf("unknown flush policy %d", c.Flush))
	}
	if c.TailCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("tail cache bytes %d must not be negative", c.TailCacheBytes))
	}
	if c.WritebackBytes < 0 {
		errs = append(errs, fmt.Errorf("writeback bytes %d must not be negative", c.WritebackBytes))
	}
	if c.PreallocateStep < 0 {
		errs = append(errs, fmt.Errorf("preallocate step %d must not be negative", c.PreallocateStep))
	}
	if c.SegmentAge < 0 || c.FileDeleteDelay < 0 || c.CheckpointInterval < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segment: invalid config: %w", err)
	}
	return nil
}

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}
