package segment

import (
	"errors"
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

// ApplyRetention deletes whole sealed segments, oldest first, that are past the retention time
// (their newest timestamp is older than Config.RetentionTime) or that the log can lose while staying
// at or above Config.RetentionBytes. The active segment is never deleted. The log start offset moves
// to the first remaining segment. It also closes segments retired long enough ago.
func (l *Log) ApplyRetention() (deleted int, err error) {
	l.appendMu.Lock()
	deleted, due, err := l.applyRetentionLocked()
	l.appendMu.Unlock()
	// Outside the lock: freeing a gigabyte segment's blocks takes seconds when done gently.
	for _, s := range due {
		err = errors.Join(err, s.shrinkAndClose())
	}
	return deleted, err
}

// applyRetentionLocked retires the segments retention deletes and takes the retired segments that
// are due to close.
func (l *Log) applyRetentionLocked() (deleted int, due []*segment, err error) {
	if l.closed.Load() {
		return 0, nil, fmt.Errorf("%w: %s", ErrClosed, l.dir)
	}
	cfg := l.config.Load()
	now := cfg.now()
	segments := l.segmentList()
	total := int64(0)
	for _, s := range segments {
		total += s.size()
	}
	for _, s := range segments[:len(segments)-1] {
		expired := cfg.RetentionTime >= 0 && s.maxTimestamp.Load() >= 0 &&
			now.UnixMilli()-s.maxTimestamp.Load() > cfg.RetentionTime.Milliseconds()
		oversize := cfg.RetentionBytes >= 0 && total-s.size() >= cfg.RetentionBytes
		if !expired && !oversize {
			break
		}
		total -= s.size()
		deleted++
	}
	var errs []error
	if deleted > 0 {
		remaining := append([]*segment(nil), segments[deleted:]...)
		l.view.Store(&logView{segments: remaining, logStartOffset: max(remaining[0].baseOffset, l.view.Load().logStartOffset)})
		for _, s := range segments[:deleted] {
			errs = append(errs, l.retireLocked(s))
		}
	}
	return deleted, l.takeDueRetiredLocked(), errors.Join(errs...)
}

// retireLocked unlinks a segment that left the list and schedules its descriptors to close.
func (l *Log) retireLocked(s *segment) error {
	l.retired = append(l.retired, retiredSegment{segment: s, at: l.config.Load().now()})
	return s.unlink()
}

// takeDueRetiredLocked removes from the retired list the segments retired at least
// Config.FileDeleteDelay ago and returns them, for the caller to close.
func (l *Log) takeDueRetiredLocked() []*segment {
	cfg := l.config.Load()
	kept := l.retired[:0]
	var due []*segment
	for _, r := range l.retired {
		if cfg.now().Sub(r.at) >= cfg.FileDeleteDelay {
			due = append(due, r.segment)
		} else {
			kept = append(kept, r)
		}
	}
	l.retired = kept
	return due
}

func (l *Log) closeRetiredLocked(all bool) error {
	cfg := l.config.Load()
	kept := l.retired[:0]
	var errs []error
	for _, r := range l.retired {
		if all || cfg.now().Sub(r.at) >= cfg.FileDeleteDelay {
			errs = append(errs, r.segment.close())
		} else {
			kept = append(kept, r)
		}
	}
	l.retired = kept
	return errors.Join(errs...)
}

// Truncate removes every batch at or after offset, so that the log ends at offset, or, when offset
// falls inside a batch, at that batch's start (inside a damaged range: at the range's start; where
// batch headers stop checking out before offset's batch: at the last good boundary before them).
// Replication uses it when a follower's log diverges from its new leader. Offsets at or above the log
// end change nothing; below the log start they are ErrOffsetOutOfRange.
//
// The truncation is durable when Truncate returns, and a crash at any point in it leaves either the
// log as it was or a prefix of it that ends at a batch boundary at or after offset: later segments
// are unlinked newest first, each unlink fsynced in the directory, before the segment holding offset
// is cut and fsynced, and the recovery point naming the new end is fsynced before any new append.
func (l *Log) Truncate(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	view := l.view.Load()
	segments := view.segments
	if offset >= segments[len(segments)-1].nextOffset() {
		return nil
	}
	if offset < view.logStartOffset {
		return fmt.Errorf("%w: truncate to %d below log start %d of %s", ErrOffsetOutOfRange, offset, view.logStartOffset, l.dir)
	}
	i := sort.Search(len(segments), func(i int) bool { return segments[i].baseOffset > offset }) - 1
	s := segments[i]
	cfg := l.config.Load()
	// Find the cut before changing anything.
	e := s.loadExtent()
	var position, newEnd int64
	run, damaged := e.runOf(s.baseOffset, offset)
	if damaged != nil {
		position, newEnd = damaged.position, damaged.firstOffset
	} else {
		var h batch.Header
		var err error
		position, h, err = s.positionOf(newHeaderReader(s.file, run.endPosition), offset, run.start)
		switch {
		case err == nil:
			newEnd = h.BaseOffset
		case isDamage(err):
			// Damage recovery did not see (below the index entry it resumed from): cut at the last
			// batch boundary before it (log_damage.go).
			position, newEnd = s.cutBeforeDamage(newHeaderReader(s.file, run.endPosition), run.start, offset)
		default:
			return fmt.Errorf("segment: truncate %s to %d: %w", l.dir, offset, l.readError(err))
		}
	}
	var kept []damage
	for _, d := range e.damage {
		if d.position < position {
			kept = append(kept, d)
		}
	}
	// Readers stop seeing the cut batches first.
	if i < len(segments)-1 {
		l.view.Store(&logView{segments: append([]*segment(nil), segments[:i+1]...), logStartOffset: view.logStartOffset})
	}
	s.extent.Store(&extent{size: position, nextOffset: newEnd, damage: kept})
	l.flush.lower(newEnd)
	fail := func(err error) error {
		l.fail(err)
		return fmt.Errorf("segment: truncate %s to %d: %w", l.dir, offset, err)
	}
	// Newest first, each durable before the next: a crash leaves the older segments, contiguous.
	for j := len(segments) - 1; j > i; j-- {
		if err := l.retireLocked(segments[j]); err != nil {
			return fail(err)
		}
		if err := syncDir(l.dir); err != nil {
			return fail(err)
		}
	}
	// Zero the cut-off bytes so no recovery can mistake them for data; the next append preallocates.
	if err := s.file.Truncate(position); err != nil {
		return fail(fmt.Errorf("segment: truncate %s at %d: %w", s.dataPath, position, err))
	}
	s.allocated = position
	if err := s.file.Sync(); err != nil { // fsync: the file's new size must be durable too
		return fail(fmt.Errorf("segment: fsync %s: %w", s.dataPath, err))
	}
	// Recompute the writer state (indexes, newest timestamp) from the newest index entry whose batch
	// checks out: one loaded from a damaged file would otherwise set the log end to whatever it
	// claims. Damage before the cut stays; the scan resumes no earlier than its end.
	if err := errors.Join(s.offsets.TruncateFromPosition(position), s.times.TruncateFromOffset(newEnd)); err != nil {
		return fail(err)
	}
	from := s.verifiedEntry(position, cfg)
	if len(kept) > 0 && from.Position < kept[len(kept)-1].endPosition {
		last := kept[len(kept)-1]
		from = index.OffsetEntry{Offset: last.endOffset, Position: last.endPosition}
	}
	var earlier []damage
	for _, d := range kept {
		if d.endPosition <= from.Position {
			earlier = append(earlier, d)
		}
	}
	cut := durablePoint{position: position, offset: newEnd, end: true}
	if _, err := s.recover(from, cut, earlier, cfg); err != nil {
		return fail(err)
	}
	// An older recovery point may name bytes past the new end that appends will now rewrite: the new
	// one must be on disk before any of them.
	if err := l.writeRecoveryPoint(recoveryPoint{segmentBase: s.baseOffset, position: position, nextOffset: newEnd, timeEntries: unknownTimeIndex}, true); err != nil {
		return fail(err)
	}
	return nil
}
