package compaction

import (
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/segment"
)

// Policy is one topic's compaction settings (Kafka's names in brackets).
type Policy struct {
	// MinCleanableDirtyRatio: a log is cleaned once its dirty bytes are at least this fraction of the
	// cleanable bytes [min.cleanable.dirty.ratio, 0.5].
	MinCleanableDirtyRatio float64
	// MinCompactionLag: a record stays uncompacted at least this long: a segment whose newest
	// timestamp is younger is not cleanable yet [min.compaction.lag.ms, 0].
	MinCompactionLag time.Duration
	// MaxCompactionLag: a log whose oldest dirty segment is older than this is cleaned whatever its
	// dirty ratio [max.compaction.lag.ms, forever].
	MaxCompactionLag time.Duration
	// DeleteRetention: a tombstone stays this long after the pass that first cleaned it, so that
	// consumers reading from behind see the deletion [delete.retention.ms, 1 day].
	DeleteRetention time.Duration
}

// DefaultPolicy returns Kafka's defaults.
func DefaultPolicy() Policy {
	return Policy{MinCleanableDirtyRatio: 0.5, MaxCompactionLag: time.Duration(1<<63 - 1), DeleteRetention: 24 * time.Hour}
}

// Validate reports the first unusable setting.
func (p Policy) Validate() error {
	switch {
	case p.MinCleanableDirtyRatio < 0 || p.MinCleanableDirtyRatio > 1:
		return fmt.Errorf("compaction: min cleanable dirty ratio %v outside [0, 1]", p.MinCleanableDirtyRatio)
	case p.MinCompactionLag < 0 || p.MaxCompactionLag < 0 || p.DeleteRetention < 0:
		return fmt.Errorf("compaction: durations must not be negative")
	}
	return nil
}

// Plan is what the policy decides for one log: which part of it a pass may clean, and whether to.
type Plan struct {
	// FirstDirty is where the dirty (never cleaned) section starts; FirstUncleanable where the part a
	// pass may clean ends (a segment boundary: the active segment and segments younger than the
	// minimum compaction lag are never cleaned).
	// Invariant: LogStart <= FirstDirty <= FirstUncleanable.
	LogStart, FirstDirty, FirstUncleanable int64
	// CleanBytes and DirtyBytes are the sizes of [LogStart, FirstDirty) and [FirstDirty,
	// FirstUncleanable), counted by whole segments (a segment holding FirstDirty counts as dirty).
	CleanBytes, DirtyBytes int64
	// Due: the dirty ratio reached the minimum, or the oldest dirty segment passed the maximum lag.
	Due bool
}

// DirtyRatio is DirtyBytes over the cleanable bytes (0 when there are none).
func (p Plan) DirtyRatio() float64 {
	if p.CleanBytes+p.DirtyBytes == 0 {
		return 0
	}
	return float64(p.DirtyBytes) / float64(p.CleanBytes+p.DirtyBytes)
}

// PlanCleaning decides, from the log's segments (oldest first, the last one active), its start, the
// first dirty offset the last pass recorded, and stable (no record at or after it is cleaned: the
// high watermark, or the last stable offset under transactions, so that a record a leader change may
// still truncate never shadows an acknowledged one), what a pass may clean at time now. No I/O.
func PlanCleaning(segments []segment.SegmentInfo, logStart, checkpoint, stable int64, policy Policy, now time.Time) Plan {
	plan := Plan{LogStart: logStart, FirstDirty: max(checkpoint, logStart)}
	plan.FirstUncleanable = plan.FirstDirty
	nowMs := now.UnixMilli()
	oldestDirty := int64(-1) // newest timestamp of the oldest dirty segment
	for _, s := range segments {
		if !s.Sealed || s.NextOffset > stable {
			break
		}
		if s.NextOffset <= plan.FirstDirty {
			plan.CleanBytes += s.Size
			continue
		}
		if s.MaxTimestamp >= 0 && nowMs-s.MaxTimestamp < policy.MinCompactionLag.Milliseconds() {
			break // too young, and so are the ones after it (Kafka decides by segment the same way)
		}
		if s.BaseOffset > plan.FirstUncleanable && plan.FirstUncleanable > plan.FirstDirty {
			break // not contiguous (cannot happen in a dense log)
		}
		if oldestDirty < 0 {
			oldestDirty = s.MaxTimestamp
		}
		plan.DirtyBytes += s.Size
		plan.FirstUncleanable = s.NextOffset
	}
	if plan.FirstUncleanable < plan.FirstDirty {
		plan.FirstUncleanable = plan.FirstDirty
	}
	if plan.DirtyBytes == 0 {
		return plan
	}
	overdue := oldestDirty >= 0 && policy.MaxCompactionLag < time.Duration(1<<63-1) &&
		nowMs-oldestDirty >= policy.MaxCompactionLag.Milliseconds()
	plan.Due = plan.DirtyRatio() >= policy.MinCleanableDirtyRatio || overdue
	return plan
}

// group is a run of consecutive sealed segments rewritten into one.
type group struct {
	base, end int64 // [base, end): segment boundaries
	size      int64
}

// groupSegments splits the sealed segments that start before end into runs a pass rewrites into one
// segment each: at most maxBytes of input (a single larger segment stands alone) and at most 2^31-1
// offsets (a segment's relative offsets are 32-bit). It does no I/O.
func groupSegments(segments []segment.SegmentInfo, logStart, end, maxBytes int64) []group {
	var groups []group
	for _, s := range segments {
		if !s.Sealed || s.BaseOffset >= end {
			break
		}
		if s.NextOffset <= logStart {
			continue
		}
		if n := len(groups); n > 0 && groups[n-1].end == s.BaseOffset &&
			groups[n-1].size+s.Size <= maxBytes && s.NextOffset-groups[n-1].base-1 <= 1<<31-1 {
			groups[n-1].end, groups[n-1].size = s.NextOffset, groups[n-1].size+s.Size
			continue
		}
		groups = append(groups, group{base: s.BaseOffset, end: s.NextOffset, size: s.Size})
	}
	return groups
}
