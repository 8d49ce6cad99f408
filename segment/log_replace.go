package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

// Replacing sealed segments (log compaction).
//
// A Replacement swaps a run of consecutive sealed segments [base, end) for one segment holding other
// batches over the same offsets: each batch keeps its base offset and offset range, so the batch
// chain stays dense (see the package doc) while batches hold fewer records. The swap is atomic across
// crashes:
//
//  1. the new segment is written as <base>.log.cleaned, .index.cleaned and .timeindex.cleaned, and
//     fsynced whole (sealed);
//  2. the replace file (below) naming base and end is written as replace.tmp, fsynced and renamed to
//     replace, and the directory fsynced: this is the commit point;
//  3. the old segments after the first are unlinked, the three .cleaned files renamed over the first
//     one's files, and the directory fsynced;
//  4. the log publishes the new segment list (the new segment keeps the descriptors and indexes it
//     was written with); the old segments stay open for readers (Config.FileDeleteDelay); then,
//     outside the log's lock, replace is removed and the directory fsynced.
//
// Open finishes a swap whose replace file exists (steps 3 and 4 are idempotent) and otherwise deletes
// stray .cleaned files and replace.tmp: a crash before the commit point leaves the old segments, one
// after it the new one, never a mixture.
//
// replace file (20 bytes, big-endian):
//
//	offset  size  field
//	     0     8  base offset of the first replaced segment (and of the new one)
//	     8     8  end: the next offset after the replaced segments (the next segment's base)
//	    16     4  CRC-32C of bytes 0..15
const (
	cleanedSuffix   = ".cleaned"
	replaceFile     = "replace"
	replaceTempFile = "replace.tmp"
	replaceFileSize = 20
)

// SegmentInfo describes a segment of the log, for the cleaner's policy.
type SegmentInfo struct {
	BaseOffset int64
	NextOffset int64
	Size       int64
	// MaxTimestamp is the largest batch max timestamp in the segment (-1 when empty).
	MaxTimestamp int64
	// Sealed: the segment takes no more appends (every segment but the last).
	Sealed bool
}

// Segments describes the log's segments, oldest first; the last one is the active segment.
func (l *Log) Segments() []SegmentInfo {
	segments := l.segmentList()
	out := make([]SegmentInfo, len(segments))
	for i, s := range segments {
		e := s.loadExtent()
		out[i] = SegmentInfo{BaseOffset: s.baseOffset, NextOffset: e.nextOffset, Size: e.size,
			MaxTimestamp: s.maxTimestamp.Load(), Sealed: i < len(segments)-1}
	}
	return out
}

// Replacement is a swap of sealed segments in progress (see above). It is used by one goroutine.
type Replacement struct {
	log      *Log
	base     int64
	end      int64
	replaced []*segment // the segments [base, end), as the log listed them at BeginReplace
	cleaned  *segment   // the new segment, under its .cleaned names
	config   Config
	done     bool
	// crashAfter, for tests: Commit stops after this many steps, leaving the files as a crash would.
	crashAfter int
}

// errCrashed is what Commit returns when a test cut it short (crashAfter).
var errCrashed = errors.New("segment: replacement cut short (test)")

// BeginReplace starts replacing the sealed segments from the one at base up to end, which must be
// segment boundaries of the log with only sealed segments between them.
func (l *Log) BeginReplace(base, end int64) (*Replacement, error) {
	l.appendMu.Lock()
	segments := l.segmentList()
	var replaced []*segment
	for i, s := range segments[:len(segments)-1] {
		if s.baseOffset >= base && s.baseOffset < end {
			replaced = append(replaced, s)
			if s.nextOffset() > end || (s.nextOffset() < end && segments[i+1].baseOffset != s.nextOffset()) {
				replaced = nil
				break
			}
		}
	}
	closed := l.closed.Load()
	l.appendMu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: %s", ErrClosed, l.dir)
	}
	if len(replaced) == 0 || replaced[0].baseOffset != base || replaced[len(replaced)-1].nextOffset() != end {
		return nil, fmt.Errorf("segment: replace [%d, %d) of %s: not a run of sealed segments", base, end, l.dir)
	}
	if end-base-1 > maxRelativeOffset {
		return nil, fmt.Errorf("segment: replace [%d, %d) of %s: too many offsets for one segment", base, end, l.dir)
	}
	cfg := *l.config.Load()
	cfg.Preallocate = false
	cleaned, err := createCleaned(l.dir, base, &cfg)
	if err != nil {
		return nil, err
	}
	return &Replacement{log: l, base: base, end: end, replaced: replaced, cleaned: cleaned, config: cfg}, nil
}

// createCleaned makes the files of a new segment under their .cleaned names, empty.
func createCleaned(dir string, base int64, cfg *Config) (*segment, error) {
	s := &segment{baseOffset: base, dataPath: segmentName(dir, base, dataSuffix) + cleanedSuffix}
	if err := removeCleaned(dir, base); err != nil {
		return nil, err
	}
	var err error
	if s.file, err = openDataFile(s.dataPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC); err != nil {
		return nil, fmt.Errorf("segment: create %s: %w", s.dataPath, err)
	}
	if s.offsets, err = index.OpenOffsetIndex(segmentName(dir, base, offsetSuffix)+cleanedSuffix, base, cfg.MaxIndexEntries); err != nil {
		s.file.Close()
		return nil, fmt.Errorf("segment %d: %w", base, err)
	}
	if s.times, err = index.OpenTimeIndex(segmentName(dir, base, timeSuffix)+cleanedSuffix, base, cfg.MaxIndexEntries); err != nil {
		s.file.Close()
		s.offsets.Close()
		return nil, fmt.Errorf("segment %d: %w", base, err)
	}
	s.extent.Store(&extent{nextOffset: base})
	s.maxTimestamp.Store(-1)
	return s, nil
}

// Next is the offset the next batch given to Append must start at.
func (r *Replacement) Next() int64 { return r.cleaned.nextOffset() }

// Append adds whole batches to the new segment. Each must start where the previous one ended (the
// first at base) and end at or before end; their base offsets and epochs are kept as they are.
func (r *Replacement) Append(raw []byte) error {
	next := r.cleaned.nextOffset()
	position := r.cleaned.size()
	_, err := batch.Scan(raw, func(h batch.Header, _ []byte) error {
		if h.BaseOffset != next || h.NextOffset() > r.end {
			return fmt.Errorf("segment: replacement batch [%d, %d] does not follow %d within end %d", h.BaseOffset, h.LastOffset(), next, r.end)
		}
		if err := r.cleaned.indexBatch(h, position, &r.config); err != nil {
			return err
		}
		next = h.NextOffset()
		position += int64(h.Size())
		return nil
	})
	if err != nil {
		return fmt.Errorf("segment: replace in %s: %w", r.log.dir, err)
	}
	return r.cleaned.write(raw, next, &r.config)
}

// Abort discards the replacement; the log is unchanged.
func (r *Replacement) Abort() error {
	if r.done {
		return nil
	}
	r.done = true
	return errors.Join(r.cleaned.close(), removeCleaned(r.log.dir, r.base))
}

// removeCleaned removes the .cleaned files of the segment at base.
func removeCleaned(dir string, base int64) error {
	var errs []error
	for _, suffix := range []string{dataSuffix, offsetSuffix, timeSuffix} {
		if err := os.Remove(segmentName(dir, base, suffix) + cleanedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("segment: remove %s: %w", segmentName(dir, base, suffix)+cleanedSuffix, err))
		}
	}
	return errors.Join(errs...)
}

// step counts a step of Commit for the crash tests: false means stop here as if the process died.
func (r *Replacement) step(n *int) bool {
	*n++
	return r.crashAfter == 0 || *n < r.crashAfter
}

// Commit swaps the new segment in (see above). The new segment must cover [base, end) exactly. It
// fails, changing nothing, when the replaced segments left the log meanwhile (retention, truncation).
func (r *Replacement) Commit() error {
	if r.done {
		return fmt.Errorf("segment: replacement of %s already finished", r.log.dir)
	}
	if got := r.cleaned.nextOffset(); got != r.end {
		r.Abort()
		return fmt.Errorf("segment: replacement of [%d, %d) in %s ends at %d", r.base, r.end, r.log.dir, got)
	}
	l := r.log
	steps := 0
	// The new segment is sealed and indexed before the log's lock is taken: under it go only the
	// check that the replaced segments are still there, the commit point and the renames.
	if err := r.cleaned.seal(); err != nil {
		r.Abort()
		return err
	}
	r.done = true
	crashed := func() error {
		r.cleaned.close()
		return errCrashed
	}
	if !r.step(&steps) {
		return crashed()
	}
	if err := r.swap(&steps); err != nil {
		return err
	}
	// The swap is published; the replace file only tells a crashed Open to finish renames that are
	// done. Removing it needs no lock: the next swap of this log starts after this returns.
	if !r.step(&steps) {
		return errCrashed
	}
	if err := os.Remove(filepath.Join(l.dir, replaceFile)); err != nil {
		l.fail(err)
		return fmt.Errorf("segment: replace [%d, %d) of %s: remove %s: %w", r.base, r.end, l.dir, replaceFile, err)
	}
	return syncDir(l.dir)
}

// swap does, under the log's lock, the commit point, the renames and the publication of a sealed
// replacement.
func (r *Replacement) swap(steps *int) error {
	l := r.log
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	abort := func(err error) error {
		r.cleaned.close()
		removeCleaned(l.dir, r.base)
		os.Remove(filepath.Join(l.dir, replaceTempFile))
		return err
	}
	if err := l.writableLocked(); err != nil {
		return abort(err)
	}
	view := l.view.Load()
	first := -1
	for i, s := range view.segments {
		if s == r.replaced[0] {
			first = i
			break
		}
	}
	if first < 0 || first+len(r.replaced) >= len(view.segments) {
		return abort(fmt.Errorf("segment: replace [%d, %d) of %s: the segments changed meanwhile", r.base, r.end, l.dir))
	}
	for k, s := range r.replaced {
		if view.segments[first+k] != s {
			return abort(fmt.Errorf("segment: replace [%d, %d) of %s: the segments changed meanwhile", r.base, r.end, l.dir))
		}
	}
	if err := writeReplaceFile(l.dir, r.base, r.end, func() bool { return r.step(steps) }); err != nil {
		if errors.Is(err, errCrashed) {
			r.cleaned.close()
			return err
		}
		return abort(err)
	}
	if !r.step(steps) {
		r.cleaned.close()
		return errCrashed
	}
	// Past the commit point: a failure from here on leaves a swap that the next Open finishes.
	if err := finishReplaceFiles(l.dir, r.base, r.end, func() bool { return r.step(steps) }); err != nil {
		r.cleaned.close()
		if errors.Is(err, errCrashed) {
			return err
		}
		l.fail(err)
		return fmt.Errorf("segment: replace [%d, %d) of %s: %w", r.base, r.end, l.dir, err)
	}
	// The new segment's descriptors stay valid across the renames; its paths are the final ones now
	// (unlink goes by them when retention or truncation retires it later).
	fresh := r.cleaned
	fresh.dataPath = segmentName(l.dir, r.base, dataSuffix)
	segments := append([]*segment(nil), view.segments[:first]...)
	segments = append(segments, fresh)
	segments = append(segments, view.segments[first+len(r.replaced):]...)
	l.view.Store(&logView{segments: segments, logStartOffset: view.logStartOffset})
	// The first old segment's paths now name the new files: it must not be unlinked. The others were.
	now := l.config.Load().now()
	for _, s := range r.replaced {
		l.retired = append(l.retired, retiredSegment{segment: s, at: now})
	}
	return nil
}

// writeReplaceFile durably writes the replace file naming [base, end): the commit point of a swap.
func writeReplaceFile(dir string, base, end int64, proceed func() bool) error {
	var raw [replaceFileSize]byte
	binary.BigEndian.PutUint64(raw[:], uint64(base))
	binary.BigEndian.PutUint64(raw[8:], uint64(end))
	binary.BigEndian.PutUint32(raw[16:], crc32.Checksum(raw[:16], castagnoli))
	temp := filepath.Join(dir, replaceTempFile)
	f, err := os.OpenFile(temp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("segment: create %s: %w", temp, err)
	}
	_, err = f.Write(raw[:])
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("segment: write %s: %w", temp, err)
	}
	if !proceed() {
		return errCrashed
	}
	if err := os.Rename(temp, filepath.Join(dir, replaceFile)); err != nil {
		return fmt.Errorf("segment: rename %s: %w", temp, err)
	}
	return syncDir(dir)
}

// finishReplaceFiles does step 3 of a swap: the replaced segments after the first are unlinked and
// the .cleaned files renamed over the first one's. It is idempotent, so recovery repeats it.
func finishReplaceFiles(dir string, base, end int64, proceed func() bool) error {
	bases, err := segmentBasesIn(dir)
	if err != nil {
		return err
	}
	for i := len(bases) - 1; i >= 0; i-- { // newest first
		if bases[i] <= base || bases[i] >= end {
			continue
		}
		for _, suffix := range []string{offsetSuffix, timeSuffix, dataSuffix} {
			if err := os.Remove(segmentName(dir, bases[i], suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("segment: remove replaced %s: %w", segmentName(dir, bases[i], suffix), err)
			}
		}
		if !proceed() {
			return errCrashed
		}
	}
	// Indexes first, data last: until the data file is renamed, Open (finishing the swap) sees the
	// .log.cleaned file and renames what is left.
	for _, suffix := range []string{offsetSuffix, timeSuffix, dataSuffix} {
		final := segmentName(dir, base, suffix)
		if err := os.Rename(final+cleanedSuffix, final); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("segment: rename %s: %w", final+cleanedSuffix, err)
		}
		if !proceed() {
			return errCrashed
		}
	}
	return syncDir(dir)
}

// segmentBasesIn lists the base offsets of the data files in dir, unsorted, touching nothing.
func segmentBasesIn(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment: list %s: %w", dir, err)
	}
	var bases []int64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	return bases, nil
}

// finishReplace runs at Open, before the segments are listed: it completes a committed swap and
// removes what an uncommitted one left.
func finishReplace(dir string) error {
	changed := false
	raw, err := os.ReadFile(filepath.Join(dir, replaceFile))
	switch {
	case err == nil && len(raw) == replaceFileSize && crc32.Checksum(raw[:16], castagnoli) == binary.BigEndian.Uint32(raw[16:]):
		base, end := int64(binary.BigEndian.Uint64(raw)), int64(binary.BigEndian.Uint64(raw[8:]))
		if err := finishReplaceFiles(dir, base, end, func() bool { return true }); err != nil {
			return err
		}
		changed = true
	case err == nil:
		// Written whole and fsynced before its rename, so it cannot be torn: refuse to guess.
		return fmt.Errorf("%w: %s holds %d bytes that do not check out", ErrCorrupt, filepath.Join(dir, replaceFile), len(raw))
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("segment: read %s: %w", replaceFile, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("segment: list %s: %w", dir, err)
	}
	for _, e := range entries {
		stem, ok := strings.CutSuffix(e.Name(), cleanedSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		ext := filepath.Ext(stem)
		if ext != dataSuffix && ext != offsetSuffix && ext != timeSuffix {
			continue
		}
		if _, isSegment := parseSegmentName(strings.TrimSuffix(stem, ext) + dataSuffix); !isSegment {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("segment: remove unfinished %s: %w", e.Name(), err)
		}
		changed = true
	}
	for _, name := range []string{replaceTempFile, replaceFile} {
		err := os.Remove(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("segment: remove %s: %w", name, err)
		}
		changed = changed || err == nil
	}
	if !changed {
		return nil
	}
	return syncDir(dir)
}
