package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/compaction"
	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/segment"
)

// The log cleaner: one goroutine compacts, one log at a time, every partition of a topic whose
// cleanup.policy lists compact (package compaction), on leaders and followers alike: each replica
// compacts its own log, and since compaction keeps the latest record of every key, readers get the
// same latest value per key from any of them. Produce to a compacted topic requires a key on every
// record (INVALID_RECORD otherwise, as Kafka). Retention still applies with "compact,delete" and not
// with "compact" alone (topicLogConfig).

// CleanerConfig configures the log cleaner.
type CleanerConfig struct {
	// Interval is how often the cleaner looks for logs to clean (Kafka's log.cleaner.backoff.ms).
	Interval time.Duration
	// IOBytesPerSecond bounds the cleaner's reads and writes together (0: no limit; Kafka's
	// log.cleaner.io.max.bytes.per.second).
	IOBytesPerSecond int64
	// KeyMapBytes bounds the memory of the key map (Kafka's log.cleaner.dedupe.buffer.size).
	KeyMapBytes int64
}

// DefaultCleanerConfig: every 15 s, unthrottled, a 32 MiB key map.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{Interval: 15 * time.Second, KeyMapBytes: 32 << 20}
}

// Validate reports the first unusable setting.
func (c CleanerConfig) Validate() error {
	if c.Interval <= 0 || c.IOBytesPerSecond < 0 || c.KeyMapBytes < 1024 {
		return fmt.Errorf("cleaner interval %v must be positive, io bytes per second %d not negative, key map %d bytes at least 1 KiB",
			c.Interval, c.IOBytesPerSecond, c.KeyMapBytes)
	}
	return nil
}

// topicCompaction reads a topic's compaction policy, nil unless its cleanup.policy lists compact.
func topicCompaction(configs map[string]string) *compaction.Policy {
	if !coordinator.CleanupPolicyHas(configs[coordinator.ConfigCleanupPolicy], "compact") {
		return nil
	}
	policy := compaction.DefaultPolicy()
	millis := func(key string, into *time.Duration) {
		if n, err := strconv.ParseInt(configs[key], 10, 64); err == nil && n >= 0 {
			*into = time.Duration(min(n, int64(1<<63-1)/int64(time.Millisecond))) * time.Millisecond
			if n >= int64(1<<63-1)/int64(time.Millisecond) {
				*into = time.Duration(1<<63 - 1)
			}
		}
	}
	millis(coordinator.ConfigDeleteRetentionMs, &policy.DeleteRetention)
	millis(coordinator.ConfigMinCompactionLagMs, &policy.MinCompactionLag)
	millis(coordinator.ConfigMaxCompactionLagMs, &policy.MaxCompactionLag)
	if ratio, err := strconv.ParseFloat(configs[coordinator.ConfigMinCleanableDirtyRatio], 64); err == nil && ratio >= 0 && ratio <= 1 {
		policy.MinCleanableDirtyRatio = ratio
	}
	return &policy
}

// compactedLogConfig adjusts the log settings of a compacted topic: without "delete" in its
// cleanup.policy retention never deletes, and the active segment rolls by max.compaction.lag.ms so
// that no record waits longer than that to become cleanable.
func compactedLogConfig(cfg *segment.Config, configs map[string]string) {
	policy := topicCompaction(configs)
	if policy == nil {
		return
	}
	if !coordinator.CleanupPolicyHas(configs[coordinator.ConfigCleanupPolicy], "delete") {
		cfg.RetentionTime, cfg.RetentionBytes = -1, -1
	}
	if policy.MaxCompactionLag > 0 && (cfg.SegmentAge == 0 || policy.MaxCompactionLag < cfg.SegmentAge) {
		cfg.SegmentAge = policy.MaxCompactionLag
	}
}

// logCleaner is the broker's cleaner loop and what it reports.
type logCleaner struct {
	cleaner                                   *compaction.Cleaner
	passes, segments, errs                    *metrics.Counter
	bytesRead, bytesReclaimed, bytesRewritten *metrics.Counter
	throttle                                  *compaction.Throttle
	// plans is the latest plan per partition, for the dirty ratio gauges.
	plans sync.Map // *partition -> compaction.Plan
}

func newLogCleaner(cfg CleanerConfig, set *metrics.Set) (*logCleaner, error) {
	ccfg := compaction.DefaultConfig()
	ccfg.KeyMapBytes = cfg.KeyMapBytes
	ccfg.Throttle = compaction.NewThrottle(cfg.IOBytesPerSecond)
	cleaner, err := compaction.NewCleaner(ccfg)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if set == nil {
		set = metrics.NewSet()
	}
	return &logCleaner{
		cleaner:        cleaner,
		throttle:       ccfg.Throttle,
		passes:         set.NewCounter("sluice_cleaner_passes_total"),
		segments:       set.NewCounter("sluice_cleaner_segments_cleaned_total"),
		errs:           set.NewCounter("sluice_cleaner_errors_total"),
		bytesRead:      set.NewCounter("sluice_cleaner_read_bytes_total"),
		bytesReclaimed: set.NewCounter("sluice_cleaner_reclaimed_bytes_total"),
		bytesRewritten: set.NewCounter("sluice_cleaner_cleaned_bytes_total"),
	}, nil
}

// runCleaner compacts the logs of compacted topics until the broker stops.
func (b *Broker) runCleaner() {
	defer b.background.Done()
	defer b.cleaner.cleaner.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-b.stop
		cancel()
	}()
	ticker := time.NewTicker(b.config.Cleaner.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-ticker.C:
		}
		b.cleanAll(ctx)
	}
}

// cleanAll runs one pass over every compacted log that is due.
func (b *Broker) cleanAll(ctx context.Context) {
	b.registry.forEach(func(p *partition) {
		state := p.state.Load()
		if ctx.Err() != nil || state == nil || state.compaction == nil {
			return
		}
		// Only what is committed is cleaned: a record a leader change could still truncate must not
		// shadow an older acknowledged one.
		stable, err := p.lastStableOffset()
		if err != nil {
			b.logger.Error("log cleaner: last stable offset", "topic", p.topic, "partition", p.index, "err", err)
			return
		}
		stats, err := b.cleaner.cleaner.Clean(ctx, p.log, *state.compaction, time.Now(), stable)
		b.cleaner.plans.Store(p, stats.Plan)
		b.cleaner.bytesRead.Add(int(stats.BytesRead))
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, segment.ErrClosed) {
				b.cleaner.errs.Inc()
				b.logger.Error("log cleaner", "topic", p.topic, "partition", p.index, "err", err)
			}
			return
		}
		if !stats.Cleaned {
			return
		}
		b.cleaner.passes.Inc()
		b.cleaner.segments.Add(stats.Segments)
		b.cleaner.bytesRewritten.Add(int(stats.BytesIn))
		b.cleaner.bytesReclaimed.Add(int(stats.Reclaimed()))
		b.cleaner.plans.Store(p, compaction.Inspect(p.log, *state.compaction, time.Now(), stable))
		b.logger.Info("log cleaned", "topic", p.topic, "partition", p.index, "segments", stats.Segments,
			"bytes_before", stats.BytesIn, "bytes_after", stats.BytesOut, "cleaned_up_to", stats.CleanedUpTo,
			"dirty_ratio_before", fmt.Sprintf("%.2f", stats.Plan.DirtyRatio()), "duration", stats.Duration)
	})
}

// writeCleanerMetrics writes, per compacted partition, its dirty ratio and the offset below which it
// was cleaned, as of the cleaner's last look.
func (b *Broker) writeCleanerMetrics(w io.Writer) {
	writeFamilyType(w, "sluice_cleaner_throttled_seconds_total", "counter")
	fmt.Fprintf(w, "sluice_cleaner_throttled_seconds_total %.6f\n", b.cleaner.throttle.Throttled().Seconds())
	b.registry.forEach(func(p *partition) {
		value, ok := b.cleaner.plans.Load(p)
		if !ok || !b.metrics.topics.has(p.topic) {
			return
		}
		plan := value.(compaction.Plan)
		labels := fmt.Sprintf(`{topic=%q,partition="%d"}`, p.topic, p.index)
		fmt.Fprintf(w, "sluice_partition_dirty_ratio%s %.4f\n", labels, plan.DirtyRatio())
		fmt.Fprintf(w, "sluice_partition_cleaned_offset%s %d\n", labels, plan.FirstDirty)
	})
}
