package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

const (
	dataSuffix      = ".log"
	offsetSuffix    = ".index"
	timeSuffix      = ".timeindex"
	offsetNameWidth = 20
)

// segment is one data file and its two indexes. Fields below the line are written only by the log's
// single writer (under appendMu); the atomics are what readers see.
type segment struct {
	baseOffset int64
	dataPath   string
	file       *os.File
	offsets    *index.OffsetIndex
	times      *index.TimeIndex

	// Invariant: size covers whole validated batches only, and grows only, except under Truncate.
	size       atomic.Int64
	nextOffset atomic.Int64 // offset after the last batch
	// maxTimestamp is the largest batch max timestamp in the segment (-1 when empty).
	maxTimestamp atomic.Int64

	// writer-owned
	maxTimestampOffset int64     // base offset of the batch holding maxTimestamp
	bytesSinceIndex    int64     // bytes appended since the last offset index entry
	firstAppend        time.Time // when the first batch was appended, for age-based rolls
	allocated          int64     // bytes preallocated in the file

	// closing keeps close from pulling the descriptor from under the flusher, which syncs outside
	// appendMu a segment it sampled as active: Truncate may retire it and retention close it
	// meanwhile. sync holds it shared; close holds it to set closed.
	closing struct {
		sync.RWMutex
		closed bool
	}
}

func segmentName(dir string, baseOffset int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%0*d%s", offsetNameWidth, baseOffset, suffix))
}

// parseSegmentName returns the base offset of a data file name, or false for any other file.
func parseSegmentName(name string) (int64, bool) {
	if len(name) != offsetNameWidth+len(dataSuffix) || filepath.Ext(name) != dataSuffix {
		return 0, false
	}
	for _, c := range name[:offsetNameWidth] {
		if c < '0' || c > '9' { // ParseInt alone would take "+0000000000000000005.log"
			return 0, false
		}
	}
	base, err := strconv.ParseInt(name[:offsetNameWidth], 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// openSegment opens (creating when absent) the files of the segment at baseOffset. It does not
// establish size and nextOffset: the caller recovers or loads them.
func openSegment(dir string, baseOffset int64, cfg *Config) (*segment, error) {
	s := &segment{baseOffset: baseOffset, dataPath: segmentName(dir, baseOffset, dataSuffix)}
	var err error
	if s.file, err = os.OpenFile(s.dataPath, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return nil, fmt.Errorf("segment: open %s: %w", s.dataPath, err)
	}
	if s.offsets, err = index.OpenOffsetIndex(segmentName(dir, baseOffset, offsetSuffix), baseOffset, cfg.MaxIndexEntries); err != nil {
		s.file.Close()
		return nil, fmt.Errorf("segment %d: %w", baseOffset, err)
	}
	if s.times, err = index.OpenTimeIndex(segmentName(dir, baseOffset, timeSuffix), baseOffset, cfg.MaxIndexEntries); err != nil {
		s.file.Close()
		s.offsets.Close()
		return nil, fmt.Errorf("segment %d: %w", baseOffset, err)
	}
	s.nextOffset.Store(baseOffset)
	s.maxTimestamp.Store(-1)
	return s, nil
}

// createSegment makes a new, empty, preallocated segment.
func createSegment(dir string, baseOffset int64, cfg *Config) (*segment, error) {
	s, err := openSegment(dir, baseOffset, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.reserve(1, cfg); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// reserve makes sure the file is preallocated at least up to end: when it is not, it preallocates
// the next Config.PreallocateStep bytes (the whole segment when the step is 0), never past the
// segment size unless end itself is past it. Appends therefore grow the file once per step, not once
// per write, and an idle partition holds one step of disk rather than a whole segment.
func (s *segment) reserve(end int64, cfg *Config) error {
	if !cfg.Preallocate || end <= s.allocated {
		return nil
	}
	target := cfg.SegmentBytes
	if cfg.PreallocateStep > 0 {
		target = min(s.allocated+cfg.PreallocateStep, cfg.SegmentBytes)
	}
	err := s.preallocate(max(target, end))
	if errors.Is(err, unix.ENOSPC) && target > end {
		// A full step does not fit, but this write may: reserve just what it needs.
		err = s.preallocate(end)
	}
	return err
}

// preallocate reserves size bytes so that appends do not allocate blocks or grow the file.
func (s *segment) preallocate(size int64) error {
	err := unix.Fallocate(int(s.file.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		err = s.file.Truncate(size) // sparse fallback; ENOSPC then surfaces on write
	}
	if err != nil {
		return fmt.Errorf("segment: preallocate %s to %d bytes: %w", s.dataPath, size, err)
	}
	s.allocated = size
	return nil
}

// write appends raw (whole batches already assigned offsets) at the logical end and publishes it.
func (s *segment) write(raw []byte, nextOffset int64, cfg *Config) error {
	position := s.size.Load()
	if err := s.reserve(position+int64(len(raw)), cfg); err != nil {
		return err // ENOSPC lands here, before anything is written
	}
	if _, err := s.file.WriteAt(raw, position); err != nil {
		return fmt.Errorf("segment: write %d bytes at %s:%d: %w", len(raw), s.dataPath, position, err)
	}
	s.size.Store(position + int64(len(raw)))
	s.nextOffset.Store(nextOffset)
	return nil
}

// indexBatch updates the indexes for a batch about to be written at position.
func (s *segment) indexBatch(h batch.Header, position int64, cfg *Config) error {
	if h.MaxTimestamp > s.maxTimestamp.Load() {
		s.maxTimestamp.Store(h.MaxTimestamp)
		s.maxTimestampOffset = h.BaseOffset
	}
	// A full index makes the next append roll (fits); until then, batches of this append and batches
	// found by recovery (perhaps under a smaller MaxIndexEntries) just go unindexed.
	if s.bytesSinceIndex >= cfg.IndexIntervalBytes && position > 0 && !s.offsets.Full() && !s.times.Full() {
		if err := s.offsets.Append(h.BaseOffset, position); err != nil {
			return err
		}
		if _, err := s.times.MaybeAppend(s.maxTimestamp.Load(), s.maxTimestampOffset); err != nil {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(h.Size())
	return nil
}

// fits reports whether a batch group of size bytes and records offsets may go into this segment.
func (s *segment) fits(size int64, lastOffset int64, cfg *Config) bool {
	if s.size.Load() == 0 {
		return lastOffset-s.baseOffset <= maxRelativeOffset
	}
	if s.size.Load()+size > cfg.SegmentBytes || lastOffset-s.baseOffset > maxRelativeOffset {
		return false
	}
	if s.offsets.Full() || s.times.Full() {
		return false
	}
	if cfg.SegmentAge > 0 && !s.firstAppend.IsZero() && cfg.now().Sub(s.firstAppend) >= cfg.SegmentAge {
		return false
	}
	return true
}

// maxRelativeOffset: offsets in a segment's indexes are stored relative to its base in 32 bits.
const maxRelativeOffset = 1<<31 - 1

// seal makes a segment that will take no more appends durable and compact: data trimmed to its
// logical size and fsynced, indexes written in full and fsynced.
func (s *segment) seal() error {
	if err := s.file.Truncate(s.size.Load()); err != nil {
		return fmt.Errorf("segment: trim %s: %w", s.dataPath, err)
	}
	s.allocated = s.size.Load()
	if err := unix.Fdatasync(int(s.file.Fd())); err != nil {
		return fmt.Errorf("segment: fdatasync %s: %w", s.dataPath, err)
	}
	if err := s.offsets.Seal(); err != nil {
		return err
	}
	return s.times.Seal()
}

// sync fdatasyncs the data file. A segment closed since (retired by Truncate or retention) has
// nothing left to sync: rolling sealed its data, or Truncate cut it.
func (s *segment) sync() error {
	s.closing.RLock()
	defer s.closing.RUnlock()
	if s.closing.closed {
		return nil
	}
	if err := unix.Fdatasync(int(s.file.Fd())); err != nil {
		return fmt.Errorf("segment: fdatasync %s: %w", s.dataPath, err)
	}
	return nil
}

func (s *segment) close() error {
	s.closing.Lock()
	s.closing.closed = true
	s.closing.Unlock()
	return errors.Join(s.file.Close(), s.offsets.Close(), s.times.Close())
}

// unlink removes the segment's files but keeps the descriptors open for readers.
func (s *segment) unlink() error {
	var errs []error
	for _, path := range []string{s.dataPath, trimSuffix(s.dataPath) + offsetSuffix, trimSuffix(s.dataPath) + timeSuffix} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("segment: remove %s: %w", path, err))
		}
	}
	return errors.Join(errs...)
}

func (s *segment) remove() error { return errors.Join(s.unlink(), s.close()) }

func trimSuffix(path string) string { return path[:len(path)-len(filepath.Ext(path))] }

// headerReader reads batch headers from the data file through a window buffer, so that scanning many
// small batches costs one pread per window rather than one per batch.
type headerReader struct {
	file        *os.File
	limit       int64 // bytes beyond it are not read
	window      []byte
	windowStart int64
	windowLen   int
}

func newHeaderReader(file *os.File, limit int64) *headerReader {
	return &headerReader{file: file, limit: limit, window: make([]byte, 16<<10)}
}

// at returns the header of the batch at position, which must end at or before the limit.
func (r *headerReader) at(position int64) (batch.Header, error) {
	if position+batch.HeaderSize > r.limit {
		return batch.Header{}, fmt.Errorf("%w: header at %d crosses end %d", batch.ErrTruncated, position, r.limit)
	}
	if position < r.windowStart || position+batch.HeaderSize > r.windowStart+int64(r.windowLen) {
		n, err := r.file.ReadAt(r.window[:min(int64(len(r.window)), r.limit-position)], position)
		if err != nil && !(errors.Is(err, io.EOF) && n >= batch.HeaderSize) {
			return batch.Header{}, fmt.Errorf("segment: read header at %d: %w", position, err)
		}
		r.windowStart, r.windowLen = position, n
	}
	offset := position - r.windowStart
	h, err := batch.ParseHeader(r.window[offset:r.windowLen])
	if err != nil {
		return h, err
	}
	if position+int64(h.Size()) > r.limit {
		return h, fmt.Errorf("%w: batch at %d of %d bytes crosses end %d", batch.ErrTruncated, position, h.Size(), r.limit)
	}
	return h, nil
}

// positionOf returns the position of the batch holding offset, scanning forward from the index, and
// that batch's header. Requires baseOffset <= offset < nextOffset at limit.
//
// Recovery verifies only the newest index entries it resumes from; an older one damaged on disk may
// name the wrong place. The scan checks that the batch at the entry has the entry's offset and that
// offsets stay dense after it, and if not starts again from the segment start, which needs no index.
func (s *segment) positionOf(r *headerReader, offset int64) (int64, batch.Header, error) {
	entry := s.offsets.Lookup(offset)
	start := index.OffsetEntry{Offset: s.baseOffset}
	position, h, err := s.scanFor(r, entry, offset)
	if err != nil && entry != start { // a damaged entry may sit at position 0 too
		position, h, err = s.scanFor(r, start, offset)
	}
	if err != nil {
		return 0, h, fmt.Errorf("segment %d: find offset %d: %w", s.baseOffset, offset, err)
	}
	return position, h, nil
}

// scanFor walks the batch headers from the one entry names to the one holding offset.
func (s *segment) scanFor(r *headerReader, entry index.OffsetEntry, offset int64) (int64, batch.Header, error) {
	position, next := entry.Position, entry.Offset
	for {
		h, err := r.at(position)
		if err != nil {
			return 0, h, err
		}
		if h.BaseOffset != next || next > offset {
			return 0, h, fmt.Errorf("%w: batch at %d has offset %d, expected %d", batch.ErrCorrupt, position, h.BaseOffset, next)
		}
		if h.LastOffset() >= offset {
			return position, h, nil
		}
		position += int64(h.Size())
		next = h.NextOffset()
	}
}
