package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

const (
	recoveryPointFile = "recovery-point"
	cleanShutdownFile = "clean-shutdown"
	recoveryPointSize = 28
	// recoveryChunk is how much of a data file recovery reads at a time.
	recoveryChunk = 4 << 20
	// verifyAttempts bounds how many index entries recovery tries before scanning a whole segment.
	verifyAttempts = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type recoveryPoint struct {
	segmentBase int64
	position    int64
	nextOffset  int64
}

// Open opens the log in dir, creating dir and an empty first segment when there is none, and
// recovers it as the package doc describes.
func Open(dir string, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("segment: create %s: %w", dir, err)
	}
	l := &Log{dir: dir}
	l.config.Store(&cfg)
	bases, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(dir, cleanShutdownFile))
	clean := statErr == nil
	point, hasPoint := readRecoveryPoint(dir)

	var segments []*segment
	closeAll := func() {
		for _, s := range segments {
			s.close()
		}
	}
	if len(bases) == 0 {
		s, err := createSegment(dir, 0, &cfg)
		if err != nil {
			return nil, err
		}
		segments = append(segments, s)
	}
	for i, base := range bases {
		s, err := openSegment(dir, base, &cfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		last := i == len(bases)-1
		var from index.OffsetEntry
		var replay bool
		switch {
		case clean || !last && (!hasPoint || base < point.segmentBase):
			// Sealed (or cleanly closed): everything up to the last entry that checks out.
			from = s.verifiedEntry(1<<62, &cfg)
			replay = s.timeIndexDamaged()
		case hasPoint && base == point.segmentBase:
			from = s.verifiedEntry(point.position, &cfg)
			// The two index files are written separately and not fsynced: after a crash the time
			// index may lack entries the offset index has.
			replay = true
		default:
			from = index.OffsetEntry{Offset: base}
		}
		if replay {
			if err := s.replayTimes(from); err != nil {
				from = index.OffsetEntry{Offset: base} // the data below from is damaged too: rescan it all
			}
		}
		if err := s.recover(from, &cfg); err != nil {
			s.close()
			closeAll()
			return nil, err
		}
		if len(segments) > 0 {
			prev := segments[len(segments)-1]
			if s.baseOffset != prev.nextOffset.Load() || prev.size.Load() == 0 {
				// A gap: the previous segment lost its tail or is empty. Offsets must stay dense, so
				// what follows the gap cannot be served; it is removed.
				s.remove()
				for _, later := range bases[i+1:] {
					removeSegmentFiles(dir, later)
				}
				break
			}
		}
		segments = append(segments, s)
	}
	// Shape the files: sealed segments trimmed, the active one preallocated past its logical end
	// (which also zeroes any torn tail beyond it).
	for i, s := range segments {
		if i < len(segments)-1 {
			// After a clean close sealed segments are already trimmed and synced; resealing every
			// one would cost an fsync per segment on each start.
			if !clean || s.allocated != s.size.Load() {
				err = s.seal()
			}
		} else {
			err = s.reopenActive(&cfg)
		}
		if err != nil {
			closeAll()
			return nil, err
		}
	}
	l.segments.Store(&segments)
	l.logStartOffset.Store(segments[0].baseOffset)
	active := segments[len(segments)-1]
	// Recovered bytes may sit only in the page cache: make them durable before claiming them.
	if err := active.sync(); err != nil {
		closeAll()
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		closeAll()
		return nil, fmt.Errorf("segment: remove clean marker in %s: %w", dir, err)
	}
	if err := syncDir(dir); err != nil {
		closeAll()
		return nil, err
	}
	l.writeRecoveryPoint(recoveryPoint{segmentBase: active.baseOffset, position: active.size.Load(), nextOffset: active.nextOffset.Load()})
	l.flush.start(l, active.nextOffset.Load())
	return l, nil
}

// listSegments returns the base offsets of the data files in dir, sorted, and removes index files
// whose data file is gone. Other files are left alone.
func listSegments(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment: list %s: %w", dir, err)
	}
	var bases []int64
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	for name := range names {
		for _, suffix := range []string{offsetSuffix, timeSuffix} {
			if stem, ok := strings.CutSuffix(name, suffix); ok {
				if _, isSegment := parseSegmentName(stem + dataSuffix); isSegment && !names[stem+dataSuffix] {
					os.Remove(filepath.Join(dir, name))
				}
			}
		}
	}
	slices.Sort(bases)
	return bases, nil
}

func removeSegmentFiles(dir string, base int64) {
	for _, suffix := range []string{dataSuffix, offsetSuffix, timeSuffix} {
		os.Remove(segmentName(dir, base, suffix))
	}
}

// verifiedEntry returns the newest offset index entry at or below position whose batch checks out
// (whole, valid, with the entry's offset), or the segment start. Entries after it are not trusted.
func (s *segment) verifiedEntry(position int64, cfg *Config) index.OffsetEntry {
	entries := s.offsets.Entries()
	tried := 0
	for i := len(entries) - 1; i >= 0 && tried < verifyAttempts; i-- {
		e := entries[i]
		if e.Position > position {
			continue
		}
		tried++
		if s.batchAt(e.Position, e.Offset) {
			return e
		}
	}
	return index.OffsetEntry{Offset: s.baseOffset}
}

// batchAt reports whether a valid batch with the given base offset starts at position.
func (s *segment) batchAt(position, offset int64) bool {
	var header [batch.HeaderSize]byte
	if _, err := s.file.ReadAt(header[:], position); err != nil {
		return false
	}
	h, err := batch.ParseHeader(header[:])
	if err != nil || h.BaseOffset != offset {
		return false
	}
	raw := make([]byte, h.Size())
	if _, err := s.file.ReadAt(raw, position); err != nil {
		return false
	}
	_, err = batch.Validate(raw)
	return err == nil
}

// timeIndexDamaged reports whether a sealed segment's time index visibly lost entries: a torn or
// corrupt tail, no entries beside a non-empty offset index (timestamps are positive, so the first
// offset index entry always comes with a time entry), or a newest entry that names no batch holding
// its timestamp. A file cut exactly at an entry boundary is not detected (Kafka does not either).
func (s *segment) timeIndexDamaged() bool {
	if s.times.Trimmed() {
		return true
	}
	last, ok := s.times.Last()
	if !ok {
		return s.offsets.Len() > 0
	}
	info, err := s.file.Stat()
	if err != nil {
		return true
	}
	_, h, err := s.positionOf(newHeaderReader(s.file, info.Size()), last.Offset)
	return err != nil || h.BaseOffset != last.Offset || h.MaxTimestamp != last.Timestamp
}

// replayTimes rebuilds the time index, and the newest timestamp, for the batches up to and including
// the one at from by reading their headers, adding an entry at each offset index entry as indexBatch
// would have. recover goes on from there. Without it, entries lost before from would make those that
// recover adds claim too low a maximum, and lookups by time would skip batches. It fails when the
// headers below from do not chain; the time index is then empty.
func (s *segment) replayTimes(from index.OffsetEntry) error {
	if err := s.times.TruncateFromOffset(s.baseOffset); err != nil {
		return err
	}
	if from.Position == 0 {
		return nil
	}
	info, err := s.file.Stat()
	if err != nil {
		return fmt.Errorf("segment: stat %s: %w", s.dataPath, err)
	}
	points := s.offsets.Entries()
	r := newHeaderReader(s.file, info.Size())
	maxTimestamp, maxTimestampOffset := int64(-1), s.baseOffset
	position, next := int64(0), s.baseOffset
	for position <= from.Position {
		h, err := r.at(position)
		if err == nil && h.BaseOffset != next {
			err = fmt.Errorf("%w: batch at %d has offset %d, want %d", batch.ErrCorrupt, position, h.BaseOffset, next)
		}
		if err != nil {
			s.times.TruncateFromOffset(s.baseOffset)
			return fmt.Errorf("segment %d: replay time index: %w", s.baseOffset, err)
		}
		if h.MaxTimestamp > maxTimestamp {
			maxTimestamp, maxTimestampOffset = h.MaxTimestamp, h.BaseOffset
		}
		for len(points) > 0 && points[0].Position < position {
			points = points[1:]
		}
		if len(points) > 0 && points[0].Position == position && position > 0 && !s.times.Full() {
			if _, err := s.times.MaybeAppend(maxTimestamp, maxTimestampOffset); err != nil {
				return err
			}
		}
		position += int64(h.Size())
		next = h.NextOffset()
	}
	return nil
}

// recover scans the data file from a trusted batch boundary, validating each batch (structure, CRC,
// dense offsets), and establishes the segment's logical end at the first byte that is not a valid
// next batch. Index entries after the trusted point are rebuilt.
func (s *segment) recover(from index.OffsetEntry, cfg *Config) error {
	info, err := s.file.Stat()
	if err != nil {
		return fmt.Errorf("segment: stat %s: %w", s.dataPath, err)
	}
	fileSize := info.Size()
	s.allocated = fileSize
	// Keep the entries up to from. Starting at the segment start, keep none: entries are never at
	// position 0, so one there is garbage that would make every rebuilt entry look out of order.
	keepBelow := from.Position + 1
	if from.Position == 0 {
		keepBelow = 0
	}
	if err := s.offsets.TruncateFromPosition(keepBelow); err != nil {
		return err
	}
	if err := s.times.TruncateFromOffset(from.Offset + 1); err != nil {
		return err
	}
	s.maxTimestamp.Store(-1)
	if e, ok := s.times.Last(); ok {
		s.maxTimestamp.Store(e.Timestamp)
		s.maxTimestampOffset = e.Offset
	}
	s.bytesSinceIndex = 0
	position, next := from.Position, from.Offset
	var buf []byte
	readSize := int64(recoveryChunk)
	for position < fileSize {
		want := min(readSize, fileSize-position)
		if int64(cap(buf)) < want {
			buf = make([]byte, want)
		}
		n, err := s.file.ReadAt(buf[:want], position)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("segment: read %s at %d: %w", s.dataPath, position, err)
		}
		chunk := buf[:n]
		consumed := 0
		for {
			rest := chunk[consumed:]
			h, err := batch.Validate(rest)
			if err == nil && h.BaseOffset == next {
				if err := s.indexBatch(h, position+int64(consumed), cfg); err != nil {
					return fmt.Errorf("segment: rebuild index of %s: %w", s.dataPath, err)
				}
				next = h.NextOffset()
				consumed += h.Size()
				continue
			}
			if errors.Is(err, batch.ErrTruncated) {
				// The batch may just continue past this chunk: read again from its start.
				need := int64(batch.HeaderSize)
				if len(rest) >= batch.HeaderSize {
					need = int64(h.Size())
				}
				plausible := len(rest) < batch.HeaderSize || h.BaseOffset == next
				if plausible && position+int64(consumed)+need <= fileSize && int64(len(rest)) < need {
					readSize = max(recoveryChunk, need)
					break
				}
			}
			// The first byte that is not a valid next batch: the logical end.
			s.size.Store(position + int64(consumed))
			s.nextOffset.Store(next)
			return nil
		}
		position += int64(consumed)
	}
	s.size.Store(position)
	s.nextOffset.Store(next)
	return nil
}

// reopenActive prepares the last segment for appends: its file cut to the logical end (dropping any
// torn tail) and preallocated again, which leaves zeroes after the end.
func (s *segment) reopenActive(cfg *Config) error {
	size := s.size.Load()
	if s.allocated != size {
		if err := s.file.Truncate(size); err != nil {
			return fmt.Errorf("segment: cut %s at %d: %w", s.dataPath, size, err)
		}
		s.allocated = size
	}
	// Preallocation only saves appends from growing the file; on a full disk the log still opens,
	// and appends report ENOSPC when they cannot reserve space themselves.
	if err := s.reserve(size+1, cfg); err != nil && !errors.Is(err, unix.ENOSPC) {
		return err
	}
	if size > 0 {
		s.firstAppend = cfg.now() // age is counted from reopening: Kafka does the same
	}
	return nil
}

func readRecoveryPoint(dir string) (recoveryPoint, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, recoveryPointFile))
	if err != nil || len(raw) != recoveryPointSize {
		return recoveryPoint{}, false
	}
	if crc32.Checksum(raw[:24], castagnoli) != binary.BigEndian.Uint32(raw[24:]) {
		return recoveryPoint{}, false
	}
	return recoveryPoint{
		segmentBase: int64(binary.BigEndian.Uint64(raw)),
		position:    int64(binary.BigEndian.Uint64(raw[8:])),
		nextOffset:  int64(binary.BigEndian.Uint64(raw[16:])),
	}, true
}

// writeRecoveryPoint overwrites the recovery point in place. It is a hint that only moves recovery's
// starting point; it is written after the fsync that made it true and is not itself fsynced (a lost
// or torn write only makes the next recovery scan more).
func (l *Log) writeRecoveryPoint(p recoveryPoint) {
	var raw [recoveryPointSize]byte
	binary.BigEndian.PutUint64(raw[:], uint64(p.segmentBase))
	binary.BigEndian.PutUint64(raw[8:], uint64(p.position))
	binary.BigEndian.PutUint64(raw[16:], uint64(p.nextOffset))
	binary.BigEndian.PutUint32(raw[24:], crc32.Checksum(raw[:24], castagnoli))
	f, err := os.OpenFile(filepath.Join(l.dir, recoveryPointFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	f.WriteAt(raw[:], 0)
	f.Close()
}

func markClean(dir string) error {
	f, err := os.Create(filepath.Join(dir, cleanShutdownFile))
	if err != nil {
		return fmt.Errorf("segment: mark %s clean: %w", dir, err)
	}
	err = errors.Join(f.Sync(), f.Close())
	if err != nil {
		return fmt.Errorf("segment: mark %s clean: %w", dir, err)
	}
	return syncDir(dir)
}
