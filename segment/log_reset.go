package segment

import (
	"errors"
	"fmt"
)

// ResetTo empties the log and restarts it at offset: every segment goes, an empty active segment
// with base offset takes the next append, and the log start and end are both offset. Replication
// uses it when a follower's log ends before its leader's log start (Kafka's "truncate fully and
// start at the leader's log start offset"): the offsets in between were deleted on the leader
// (retention, DeleteRecords) and can never be fetched, so the follower starts over where the
// leader's log starts. offset may lie anywhere, below the log end too (then the log loses data it
// held).
//
// Crash safety: the old segments are unlinked newest first, each unlink fsynced in the directory,
// while readers keep their descriptors; only then is the new segment created, and the log start
// and recovery point naming it are fsynced before ResetTo returns. A crash part way leaves a prefix
// of the old log, or no segment (Open then starts an empty log at 0): either way a log that ends
// before offset, which the caller resets again. Never a log with a hole in it.
func (l *Log) ResetTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: reset %s to negative offset %d", ErrOffsetOutOfRange, l.dir, offset)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	cfg := l.config.Load()
	segments := l.view.Load().segments
	fail := func(err error) error {
		l.fail(err)
		return fmt.Errorf("segment: reset %s to %d: %w", l.dir, offset, err)
	}
	// Readers keep seeing the old segments (their descriptors stay open) until the new one is
	// published; the files go first, newest first, so that a crash leaves a contiguous prefix.
	for j := len(segments) - 1; j >= 0; j-- {
		if err := l.retireLocked(segments[j]); err != nil {
			return fail(err)
		}
		if err := syncDir(l.dir); err != nil {
			return fail(err)
		}
	}
	fresh, err := createSegment(l.dir, offset, cfg)
	if err != nil {
		return fail(err)
	}
	if err := syncDir(l.dir); err != nil {
		fresh.remove()
		return fail(err)
	}
	// A log start file naming an old segment would be ignored by Open; this one names the new one.
	if err := writeLogStart(l.dir, offset, offset); err != nil {
		fresh.remove()
		return fail(err)
	}
	l.view.Store(&logView{segments: []*segment{fresh}, logStartOffset: offset})
	// Nothing below offset is left to flush: flushes in flight on the old segments advance nothing
	// (lower counts as a truncation), and waiters below offset are released.
	l.flush.lower(offset)
	l.flush.advance(offset)
	if err := l.writeRecoveryPoint(recoveryPoint{segmentBase: offset, position: 0, nextOffset: offset, timeEntries: 0}, true); err != nil {
		return fail(err)
	}
	return errors.Join(l.closeRetiredLocked(false))
}
