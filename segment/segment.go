package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
	"github.com/sluice-mq/sluice/trash"
)

const (
	dataSuffix      = ".log"
	offsetSuffix    = ".index"
	timeSuffix      = ".timeindex"
	offsetNameWidth = 20
)

// segment is one data file and its two indexes. Fields below the line are written only by the log's
// single writer (under appendMu); extent and maxTimestamp are what readers see.
type segment struct {
	baseOffset int64
	dataPath   string
	file       *os.File
	offsets    *index.OffsetIndex
	times      *index.TimeIndex

	// extent is the segment's logical size and next offset, published together (see extent).
	extent atomic.Pointer[extent]
	// maxTimestamp is the largest batch max timestamp in the segment (-1 when empty).
	maxTimestamp atomic.Int64

	// writer-owned
	maxTimestampOffset int64     // base offset of the batch holding maxTimestamp
	bytesSinceIndex    int64     // bytes appended since the last offset index entry
	firstAppend        time.Time // when the first batch was appended, for age-based rolls
	allocated          int64     // bytes preallocated in the file
	// preallocateStep is the next preallocation: preallocateFirstStep for a segment just created or
	// opened, doubling with each step up to Config.PreallocateStep.
	preallocateStep int64

	// closing keeps close from pulling the descriptor from under the flusher, which syncs outside
	// appendMu a segment it sampled as active: Truncate may retire it and retention close it
	// meanwhile. sync holds it shared; close holds it to set closed.
	closing struct {
		sync.RWMutex
		closed bool
	}
}

// extent is what readers know of a segment's contents. It is published as one immutable value, so a
// reader never pairs one moment's size with another moment's next offset (a size that covers a batch
// its next offset does not, which would let Slice hand out a batch at or beyond upTo).
//
// Invariant: size covers whole batches only: batches validated by Append or recovery, and the
// damaged ranges recovery found below a durable point and kept in place. nextOffset is the offset
// after the last of them. Both grow only, except under Truncate.
// Invariant: an extent is never modified once published; the writer publishes a new one.
type extent struct {
	size       int64
	nextOffset int64
	// damage lists the ranges of the segment that recovery found invalid below a durable point, in
	// position order. They are kept in place, never served and never discarded.
	// Invariant: disjoint and sorted; each lies within [0, size) and its offsets within
	// [baseOffset, nextOffset]; the bytes between two of them are whole valid batches.
	damage []damage
}

// damage is a byte range of a segment that did not hold valid batches when recovery scanned it,
// although every byte of it was durable (fsynced), and the offsets it held. Reads of those offsets
// get ErrCorrupt.
// Invariant: position <= endPosition and firstOffset <= endOffset; a batch with base offset
// endOffset starts at endPosition, unless that is the segment's end.
type damage struct {
	position, endPosition  int64
	firstOffset, endOffset int64
}

func (d damage) String() string {
	return fmt.Sprintf("bytes [%d, %d) holding offsets [%d, %d)", d.position, d.endPosition, d.firstOffset, d.endOffset)
}

// run is a stretch of a segment between damaged ranges: valid batches from start up to endPosition,
// which holds the batch with offset endOffset (or is the segment's end).
type run struct {
	start                  index.OffsetEntry
	endPosition, endOffset int64
}

// run returns the k-th run of a segment whose extent is e, for k in [0, len(e.damage)].
func (e *extent) run(baseOffset int64, k int) run {
	r := run{start: index.OffsetEntry{Offset: baseOffset}, endPosition: e.size, endOffset: e.nextOffset}
	if k > 0 {
		r.start = index.OffsetEntry{Offset: e.damage[k-1].endOffset, Position: e.damage[k-1].endPosition}
	}
	if k < len(e.damage) {
		r.endPosition, r.endOffset = e.damage[k].position, e.damage[k].firstOffset
	}
	return r
}

// runOf returns the run holding offset, or the damaged range holding it.
func (e *extent) runOf(baseOffset, offset int64) (run, *damage) {
	k := sort.Search(len(e.damage), func(i int) bool { return e.damage[i].firstOffset > offset })
	if k > 0 && offset < e.damage[k-1].endOffset {
		return run{}, &e.damage[k-1]
	}
	return e.run(baseOffset, k), nil
}

func (s *segment) loadExtent() *extent { return s.extent.Load() }

func (s *segment) size() int64       { return s.extent.Load().size }
func (s *segment) nextOffset() int64 { return s.extent.Load().nextOffset }

// publish makes a new extent visible to readers, keeping the damaged ranges.
func (s *segment) publish(size, nextOffset int64) {
	s.extent.Store(&extent{size: size, nextOffset: nextOffset, damage: s.extent.Load().damage})
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

// openDataFile opens a segment's data file with O_NOATIME where the kernel allows it (the broker
// owns its files). Without it every read of a file written since its last access (relatime: each
// fetch of the active segment) updates the access time, which on ext4 is a journal handle: when a
// journal commit is slow, a fetch served on the network event loop (sendfile, pread) waits for it,
// and every connection of that loop with it.
func openDataFile(path string, flag int) (*os.File, error) {
	file, err := os.OpenFile(path, flag|unix.O_NOATIME, 0o644)
	if errors.Is(err, unix.EPERM) {
		file, err = os.OpenFile(path, flag, 0o644) // a file another user owns
	}
	return file, err
}

// openSegment opens (creating when absent) the files of the segment at baseOffset. It does not
// establish size and nextOffset: the caller recovers or loads them.
func openSegment(dir string, baseOffset int64, cfg *Config) (*segment, error) {
	s := &segment{baseOffset: baseOffset, dataPath: segmentName(dir, baseOffset, dataSuffix)}
	var err error
	if s.file, err = openDataFile(s.dataPath, os.O_RDWR|os.O_CREATE); err != nil {
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
	s.extent.Store(&extent{nextOffset: baseOffset})
	s.maxTimestamp.Store(-1)
	s.preallocateStep = preallocateFirstStep
	return s, nil
}

// createSegment makes a new, empty segment. Its file is preallocated by its first append.
func createSegment(dir string, baseOffset int64, cfg *Config) (*segment, error) {
	return openSegment(dir, baseOffset, cfg)
}

// preallocateFirstStep is the first preallocation of a segment created or opened: an idle partition
// holds at most this much disk beyond its data, not a whole step (64 MiB per empty partition filled a
// disk at about 1,200 partitions).
const preallocateFirstStep = 64 << 10

// reserve makes sure the file is preallocated at least up to end: when it is not, it preallocates
// the next step, never past the segment size unless end itself is past it. Steps start at
// preallocateFirstStep and double up to Config.PreallocateStep (a step of 0 preallocates the whole
// segment at once). Appends therefore grow the file a logarithmic number of times, not once per
// write, and nothing is preallocated before the first append.
func (s *segment) reserve(end int64, cfg *Config) error {
	if !cfg.Preallocate || end <= s.allocated {
		return nil
	}
	target := cfg.SegmentBytes
	if cfg.PreallocateStep > 0 {
		step := min(s.preallocateStep, cfg.PreallocateStep)
		target = min(s.allocated+step, cfg.SegmentBytes)
		if step == cfg.PreallocateStep && cfg.PreallocateRest && target < cfg.SegmentBytes &&
			roomForRest(s.file, cfg.SegmentBytes-s.allocated, cfg.SegmentBytes) {
			target = cfg.SegmentBytes
		}
		s.preallocateStep = min(2*step, cfg.PreallocateStep)
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
	position := s.size()
	if err := s.reserve(position+int64(len(raw)), cfg); err != nil {
		return err // ENOSPC lands here, before anything is written
	}
	if _, err := s.file.WriteAt(raw, position); err != nil {
		return fmt.Errorf("segment: write %d bytes at %s:%d: %w", len(raw), s.dataPath, position, err)
	}
	s.publish(position+int64(len(raw)), nextOffset)
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
	current := s.size()
	if current == 0 {
		return lastOffset-s.baseOffset <= maxRelativeOffset
	}
	if current+size > cfg.SegmentBytes || lastOffset-s.baseOffset > maxRelativeOffset {
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
	size := s.size()
	if err := s.file.Truncate(size); err != nil {
		return fmt.Errorf("segment: trim %s: %w", s.dataPath, err)
	}
	s.allocated = size
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

// shrinkAndClose closes a retired (unlinked) segment, first shrinking its data file a step at a
// time: the last close of an unlinked file frees all its blocks in one journal transaction, and on
// ext4 (worse mounted with discard) every fsync on the filesystem waits for it (package trash).
// Nothing reads a segment retired Config.FileDeleteDelay ago.
func (s *segment) shrinkAndClose() error {
	s.closing.Lock()
	s.closing.closed = true // no fdatasync or writeback of it from now on
	s.closing.Unlock()
	_, err := trash.Shrink(s.file, trash.DefaultConfig(), nil)
	return errors.Join(err, s.close())
}

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
// that batch's header. Requires floor.Offset <= offset < the end of the run that starts at floor, and
// r limited to that run: floor is the start of the run of valid batches holding offset (the segment
// start, or the end of a damaged range).
//
// Recovery verifies only the newest index entries it resumes from; an older one damaged on disk may
// name the wrong place. The scan checks that the batch at the entry has the entry's offset and that
// offsets stay dense after it, and if not starts again from floor, which needs no index.
func (s *segment) positionOf(r *headerReader, offset int64, floor index.OffsetEntry) (int64, batch.Header, error) {
	entry := s.offsets.Lookup(offset)
	if entry.Offset < floor.Offset || entry.Position < floor.Position {
		entry = floor
	}
	position, h, err := s.scanFor(r, entry, offset)
	if err != nil && entry != floor { // a damaged entry may sit at the floor too
		position, h, err = s.scanFor(r, floor, offset)
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
