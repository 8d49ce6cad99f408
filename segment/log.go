package segment

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// Error classes of the log.
var (
	// ErrOffsetOutOfRange: a read or truncation below the log start or above the log end.
	ErrOffsetOutOfRange = errors.New("segment: offset out of range")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("segment: log closed")
	// ErrFailed: an fsync or write failed earlier; the log takes no more appends until reopened,
	// because the kernel may have dropped the unflushed pages.
	ErrFailed = errors.New("segment: log failed")
	// ErrCorrupt: the data on disk is damaged: a read of offsets that recovery found damaged (their
	// bytes are kept in place), a batch header that does not check out when read, or a log whose
	// segments cannot be put together (Open).
	ErrCorrupt = errors.New("segment: corrupt data")
)

// Log is one partition's log. See the package doc for its invariants.
type Log struct {
	dir    string
	config atomic.Pointer[Config]

	// appendMu serializes writers: Append, roll, Truncate, retention, Close.
	appendMu sync.Mutex
	// view is the segment list and log start, published together by the writer (see logView).
	view   atomic.Pointer[logView]
	closed atomic.Bool
	// failure is set once by a failed fsync or write and never cleared.
	failure atomic.Pointer[error]
	// outOfSpace: the last append failed because the disk is full (see OutOfSpace).
	outOfSpace atomic.Bool
	retired    []retiredSegment // under appendMu

	// diskFull and readCorrupt rate-limit the log lines for appends failing with ENOSPC and for
	// reads finding damage, which a busy producer or a retrying consumer would otherwise repeat
	// without bound.
	diskFull, readCorrupt rateLimitedLine

	flush flusher
	// unwrittenBytes counts appends since the last writeback request (log_writeback.go); under
	// appendMu.
	unwrittenBytes int64
}

// logView is the log's segment list and start offset, published as one immutable value so that a
// reader never pairs a segment list with another moment's log start.
// Invariant: segments is non-empty, sorted by base offset, the last one active, and never modified
// once published (copy-on-write).
// Invariant: segments[0].baseOffset <= logStartOffset <= segments[0].nextOffset (AdvanceLogStart
// moves it inside the first segment; log_start.go).
type logView struct {
	segments       []*segment
	logStartOffset int64
}

type retiredSegment struct {
	segment *segment
	at      time.Time
}

// AppendResult describes where an Append put its batches.
type AppendResult struct {
	BaseOffset   int64 // offset given to the first record
	LastOffset   int64 // offset of the last record
	MaxTimestamp int64 // largest batch max timestamp among the appended batches
	Batches      int
}

// Append validates raw, one or more whole v2 batches back to back, assigns them consecutive offsets
// (rewriting baseOffset and partitionLeaderEpoch in raw, in place) and writes them with one write at
// the end of the active segment, rolling first if they do not fit. Nothing is written unless every
// batch is valid: errors wrap batch.ErrCorrupt, batch.ErrTruncated, batch.ErrUnsupportedMagic or
// batch.ErrInvalidRecord. The append is in the page cache on return; WaitFlushed makes it durable.
func (l *Log) Append(raw []byte, leaderEpoch int32) (AppendResult, error) {
	if len(raw) == 0 {
		return AppendResult{}, fmt.Errorf("segment: append of no batches: %w", batch.ErrTruncated)
	}
	var headerSpace [8]batch.Header
	headers := headerSpace[:0]
	if _, err := batch.Scan(raw, func(h batch.Header, _ []byte) error {
		headers = append(headers, h)
		return nil
	}); err != nil {
		return AppendResult{}, fmt.Errorf("segment: append to %s: %w", l.dir, err)
	}
	records := int64(0)
	for _, h := range headers {
		records += int64(h.LastOffsetDelta) + 1
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	cfg := l.config.Load()
	active := l.activeSegment()
	next := active.nextOffset()
	if !active.fits(int64(len(raw)), next+records-1, cfg) {
		var err error
		if active, err = l.rollLocked(); err != nil {
			l.noteDiskFull(err, cfg)
			return AppendResult{}, err
		}
	}
	result := AppendResult{BaseOffset: next, MaxTimestamp: -1, Batches: len(headers)}
	startPosition := active.size()
	position := startPosition
	for _, h := range headers {
		b := raw[position-startPosition:]
		batch.SetBaseOffset(b, next)
		batch.SetLeaderEpoch(b, leaderEpoch)
		h.BaseOffset = next
		if err := active.indexBatch(h, position, cfg); err != nil {
			l.undoIndexLocked(active, startPosition, result.BaseOffset)
			return AppendResult{}, fmt.Errorf("segment: index %s: %w", l.dir, err)
		}
		result.MaxTimestamp = max(result.MaxTimestamp, h.MaxTimestamp)
		next += int64(h.LastOffsetDelta) + 1
		position += int64(h.Size())
	}
	if err := active.write(raw, next, cfg); err != nil {
		// Nothing was published; bytes that reached the file lie beyond the logical end and are
		// overwritten by the next append (recovery discards them as a torn tail).
		l.undoIndexLocked(active, startPosition, result.BaseOffset)
		l.noteDiskFull(err, cfg)
		return AppendResult{}, err
	}
	if active.firstAppend.IsZero() {
		active.firstAppend = cfg.now()
	}
	result.LastOffset = next - 1
	if l.outOfSpace.Load() {
		l.outOfSpace.Store(false)
	}
	if cfg.Flush == FlushOnAppend {
		l.flush.poke()
	}
	l.noteAppended(int64(len(raw)), cfg)
	return result, nil
}

// undoIndexLocked drops index entries made for an append that was not written.
func (l *Log) undoIndexLocked(s *segment, position, offset int64) {
	s.offsets.TruncateFromPosition(position)
	s.times.TruncateFromOffset(offset)
}

func (l *Log) writableLocked() error {
	if l.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, l.dir)
	}
	if f := l.failure.Load(); f != nil {
		return fmt.Errorf("%w: %s: %w", ErrFailed, l.dir, *f)
	}
	return nil
}

func (l *Log) fail(err error) {
	l.failure.CompareAndSwap(nil, &err)
}

// Failure is nil while the log works, and the error that failed it once an fsync or write failed:
// from then on appends fail with ErrFailed until the log is reopened, and what it held past its
// flushed offset may be gone from the page cache. Replication reads it to move leadership and ISR
// membership off a failed copy at once (one atomic load: cheap enough for the fetch loop).
func (l *Log) Failure() error {
	if f := l.failure.Load(); f != nil {
		return *f
	}
	return nil
}

// OutOfSpace reports whether the last append failed because the disk is full, until an append
// succeeds again. Unlike Failure, nothing is lost: the log takes appends once there is space.
// Replication reads it to move a leader off a full disk (one atomic load).
func (l *Log) OutOfSpace() bool { return l.outOfSpace.Load() }

// rollLocked seals the active segment and starts a new one at the log end.
func (l *Log) rollLocked() (*segment, error) {
	cfg := l.config.Load()
	old := l.activeSegment()
	next := old.nextOffset()
	if old.size() == 0 {
		return old, nil // nothing to seal; an empty segment takes the append
	}
	if err := old.seal(); err != nil {
		l.fail(err)
		return nil, err
	}
	fresh, err := createSegment(l.dir, next, cfg)
	if err != nil {
		// ENOSPC lands here: the old segment, sealed and intact, stays active.
		return nil, fmt.Errorf("segment: roll %s at offset %d: %w", l.dir, next, err)
	}
	if err := syncDir(l.dir); err != nil {
		fresh.remove()
		return nil, err
	}
	view := l.view.Load()
	segments := append(append([]*segment(nil), view.segments...), fresh)
	l.view.Store(&logView{segments: segments, logStartOffset: view.logStartOffset})
	// Everything before the new segment was fsynced by seal.
	l.flush.advance(next)
	l.writeRecoveryPoint(recoveryPoint{segmentBase: next, position: 0, nextOffset: next, timeEntries: 0}, false)
	return fresh, nil
}

// Roll seals the active segment and starts a new one, if the active one holds any data.
func (l *Log) Roll() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	_, err := l.rollLocked()
	return err
}

func (l *Log) segmentList() []*segment { return l.view.Load().segments }

func (l *Log) activeSegment() *segment {
	segments := l.segmentList()
	return segments[len(segments)-1]
}

// LogStartOffset is the first offset still in the log.
func (l *Log) LogStartOffset() int64 { return l.view.Load().logStartOffset }

// LogEndOffset is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { return l.activeSegment().nextOffset() }

// FlushedOffset is the offset below which every record was fdatasynced.
func (l *Log) FlushedOffset() int64 { return l.flush.flushedOffset() }

// Size is the number of bytes of batches in the log.
func (l *Log) Size() int64 {
	var total int64
	for _, s := range l.segmentList() {
		total += s.size()
	}
	return total
}

// SegmentCount is the number of segments, the active one included.
func (l *Log) SegmentCount() int { return len(l.segmentList()) }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the log's current configuration.
func (l *Log) Config() Config { return *l.config.Load() }

// SetConfig replaces the configuration; it applies from the next append, roll or retention pass.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.config.Store(&cfg)
	l.flush.reconfigure()
	return nil
}

// Close stops the flusher, makes every append durable, trims the active segment, writes the indexes
// and marks the log clean so that the next Open needs no scan.
func (l *Log) Close() error {
	l.flush.stop()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	var errs []error
	active := l.activeSegment()
	if l.failure.Load() == nil {
		if err := active.seal(); err != nil {
			errs = append(errs, err)
		} else {
			// Everything appended is durable now: waiters it covers succeed, not ErrClosed.
			l.flush.advance(active.nextOffset())
			// The point at the very end tells the next Open where the log ends even if the active
			// segment turns out damaged.
			point := active.pointAtEnd() // seal wrote the indexes in full
			if err := l.writeRecoveryPoint(point, true); err != nil {
				errs = append(errs, err)
			} else if err := markClean(l.dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, s := range l.segmentList() {
		errs = append(errs, s.close())
	}
	for _, r := range l.retired {
		errs = append(errs, r.segment.close())
	}
	l.retired = nil
	l.flush.failWaiters(fmt.Errorf("%w: %s", ErrClosed, l.dir))
	return errors.Join(errs...)
}

// Delete closes the log, failing its flush waiters, and removes its directory with remove
// (os.RemoveAll when nil). The broker passes its trash bin's Discard (package trash), which frees the
// directory's name at once and removes the files in the background: removing gigabytes at once
// stalls every fsync on the filesystem.
func (l *Log) Delete(remove func(dir string) error) error {
	if remove == nil {
		remove = os.RemoveAll
	}
	l.flush.stop()
	l.appendMu.Lock()
	l.closed.Store(true)
	for _, s := range l.segmentList() {
		s.close()
	}
	for _, r := range l.retired {
		r.segment.close()
	}
	l.retired = nil
	l.appendMu.Unlock()
	l.flush.failWaiters(fmt.Errorf("%w: %s deleted", ErrClosed, l.dir))
	if err := remove(l.dir); err != nil {
		return fmt.Errorf("segment: delete %s: %w", l.dir, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("segment: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("segment: fsync dir %s: %w", dir, err)
	}
	return nil
}
