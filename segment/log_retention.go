package segment

import (
	"errors"
	"fmt"
	"sort"
)

// ApplyRetention deletes whole sealed segments, oldest first, that are past the retention time
// (their newest timestamp is older than Config.RetentionTime) or that the log can lose while staying
// at or above Config.RetentionBytes. The active segment is never deleted. The log start offset moves
// to the first remaining segment. It also closes segments retired long enough ago.
func (l *Log) ApplyRetention() (deleted int, err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() {
		return 0, fmt.Errorf("%w: %s", ErrClosed, l.dir)
	}
	cfg := l.config.Load()
	now := cfg.now()
	segments := l.segmentList()
	total := int64(0)
	for _, s := range segments {
		total += s.size.Load()
	}
	for _, s := range segments[:len(segments)-1] {
		expired := cfg.RetentionTime >= 0 && s.maxTimestamp.Load() >= 0 &&
			now.UnixMilli()-s.maxTimestamp.Load() > cfg.RetentionTime.Milliseconds()
		oversize := cfg.RetentionBytes >= 0 && total-s.size.Load() >= cfg.RetentionBytes
		if !expired && !oversize {
			break
		}
		total -= s.size.Load()
		deleted++
	}
	var errs []error
	if deleted > 0 {
		remaining := append([]*segment(nil), segments[deleted:]...)
		l.segments.Store(&remaining)
		l.logStartOffset.Store(remaining[0].baseOffset)
		for _, s := range segments[:deleted] {
			errs = append(errs, l.retireLocked(s))
		}
	}
	errs = append(errs, l.closeRetiredLocked(false))
	return deleted, errors.Join(errs...)
}

// retireLocked unlinks a segment that left the list and schedules its descriptors to close.
func (l *Log) retireLocked(s *segment) error {
	l.retired = append(l.retired, retiredSegment{segment: s, at: l.config.Load().now()})
	return s.unlink()
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
// falls inside a batch, at that batch's start. Replication uses it when a follower's log diverges from
// its new leader. Offsets at or above the log end change nothing; below the log start they are
// ErrOffsetOutOfRange.
func (l *Log) Truncate(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	segments := l.segmentList()
	if offset >= segments[len(segments)-1].nextOffset.Load() {
		return nil
	}
	if offset < l.logStartOffset.Load() {
		return fmt.Errorf("%w: truncate to %d below log start %d of %s", ErrOffsetOutOfRange, offset, l.logStartOffset.Load(), l.dir)
	}
	i := sort.Search(len(segments), func(i int) bool { return segments[i].baseOffset > offset }) - 1
	s := segments[i]
	cfg := l.config.Load()
	var errs []error
	if i < len(segments)-1 {
		kept := append([]*segment(nil), segments[:i+1]...)
		l.segments.Store(&kept)
		for _, later := range segments[i+1:] {
			errs = append(errs, l.retireLocked(later))
		}
	}
	r := newHeaderReader(s.file, s.size.Load())
	position, h, err := s.positionOf(r, offset)
	if err != nil {
		l.fail(err)
		return err
	}
	newEnd := h.BaseOffset
	l.flush.lower(newEnd)
	s.size.Store(position)
	s.nextOffset.Store(newEnd)
	errs = append(errs, s.offsets.TruncateFromPosition(position), s.times.TruncateFromOffset(newEnd))
	// Zero the cut-off bytes so no recovery can mistake them for data, and preallocate again.
	if err := s.file.Truncate(position); err != nil {
		errs = append(errs, fmt.Errorf("segment: truncate %s at %d: %w", s.dataPath, position, err))
	}
	s.allocated = position
	errs = append(errs, s.reserve(position+1, cfg))
	// Recompute the writer state from the newest index entry whose batch checks out: one loaded
	// from a damaged file would otherwise set the log end to whatever it claims.
	errs = append(errs, s.recover(s.verifiedEntry(position, cfg), cfg))
	s.allocated = max(s.allocated, position)
	if err := errors.Join(errs...); err != nil {
		l.fail(err)
		return fmt.Errorf("segment: truncate %s to %d: %w", l.dir, offset, err)
	}
	if err := s.sync(); err != nil {
		l.fail(err)
		return err
	}
	l.writeRecoveryPoint(recoveryPoint{segmentBase: s.baseOffset, position: position, nextOffset: newEnd})
	return nil
}
