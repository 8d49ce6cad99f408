package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

// durablePoint is what recovery knows must survive in a segment: every byte below position was
// fsynced, so recovery keeps it whatever it holds. Bytes that are not valid batches below it are
// damage (kept in place and reported), not a torn tail.
type durablePoint struct {
	position int64
	// offset is the offset of the batch that starts at position, or -1 when unknown.
	offset int64
	// end: the segment ends exactly at position with offset: a sealed segment, whose file is trimmed
	// to its data and whose next offset is the next segment's base.
	end bool
	// checkpoint: the point comes from the recovery-point file after a crash. A point that names only
	// zeroes, or contradicts the data, is stale or damaged and is not trusted.
	checkpoint bool
}

// recoveryReport is what recover found, for Open to log.
type recoveryReport struct {
	damage []damage // damaged ranges found by this scan
	// staleCheckpoint: the recovery point claimed bytes that are not on disk (zeroes) or that
	// contradict the data, and was ignored.
	staleCheckpoint bool
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
	_, h, err := s.positionOf(newHeaderReader(s.file, info.Size()), last.Offset, index.OffsetEntry{Offset: s.baseOffset})
	return err != nil || h.BaseOffset != last.Offset || h.MaxTimestamp != last.Timestamp
}

// replayTimes rebuilds the time index, and the newest timestamp, for the batches up to and including
// the one at from by reading their headers, adding an entry at each offset index entry as indexBatch
// would have. recover goes on from there. Without it, entries lost before from would make those that
// recover adds claim too low a maximum, and lookups by time would skip batches.
//
// The time index file holds a prefix of its entries (package index), so what a crash loses is a
// suffix: the replay starts at the batch named by the newest surviving entry at or below from, once
// that batch is found to hold the entry's timestamp, and reads only the headers after it (a crash
// with a recent recovery point then costs a few reads, not a read of the whole active segment). When
// there is no such entry, or it does not check out, it replays from the segment start. It fails when
// the headers do not chain; the time index is then empty.
func (s *segment) replayTimes(from index.OffsetEntry) error {
	if err := s.times.TruncateFromOffset(from.Offset + 1); err != nil {
		return err
	}
	info, err := s.file.Stat()
	if err != nil {
		return fmt.Errorf("segment: stat %s: %w", s.dataPath, err)
	}
	r := newHeaderReader(s.file, info.Size())
	maxTimestamp, maxTimestampOffset := int64(-1), s.baseOffset
	position, next := int64(0), s.baseOffset
	resumed := false
	if last, ok := s.times.Last(); ok {
		at, h, err := s.positionOf(r, last.Offset, index.OffsetEntry{Offset: s.baseOffset})
		if err == nil && at <= from.Position && h.BaseOffset == last.Offset && h.MaxTimestamp == last.Timestamp {
			maxTimestamp, maxTimestampOffset = last.Timestamp, last.Offset
			position, next, resumed = at, last.Offset, true
		}
	}
	if !resumed {
		if err := s.times.TruncateFromOffset(s.baseOffset); err != nil {
			return err
		}
		if from.Position == 0 {
			return nil
		}
	}
	points := s.offsets.Entries()
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
// dense offsets), rebuilds the index entries after that boundary, and publishes the segment's extent.
//
// Bytes that are not a valid next batch end the segment when they lie at or beyond the durable
// point: a torn tail of the active segment, which the caller cuts off. Below the durable point they
// are damage: recovery records the range, keeps the bytes, and resumes at the first later batch
// boundary that checks out (the damaged batch's own length, a verified index entry, or the durable
// point itself). keep holds the damaged ranges already known before from; they stay.
func (s *segment) recover(from index.OffsetEntry, durable durablePoint, keep []damage, cfg *Config) (recoveryReport, error) {
	var report recoveryReport
	info, err := s.file.Stat()
	if err != nil {
		return report, fmt.Errorf("segment: stat %s: %w", s.dataPath, err)
	}
	fileSize := info.Size()
	s.allocated = fileSize
	// Index entries after from are not trusted, but may still serve to resume after damage.
	var landmarks []index.OffsetEntry
	for _, e := range s.offsets.Entries() {
		if e.Position > from.Position {
			landmarks = append(landmarks, e)
		}
	}
	// Keep the entries up to from. Starting at the segment start, keep none: entries are never at
	// position 0, so one there is garbage that would make every rebuilt entry look out of order.
	keepBelow := from.Position + 1
	if from.Position == 0 {
		keepBelow = 0
	}
	if err := s.offsets.TruncateFromPosition(keepBelow); err != nil {
		return report, err
	}
	if err := s.times.TruncateFromOffset(from.Offset + 1); err != nil {
		return report, err
	}
	s.maxTimestamp.Store(-1)
	if e, ok := s.times.Last(); ok {
		s.maxTimestamp.Store(e.Timestamp)
		s.maxTimestampOffset = e.Offset
	}
	s.bytesSinceIndex = 0
	damaged := append([]damage(nil), keep...)
	position, next := from.Position, from.Offset
	for {
		if position, next, err = s.scanValid(position, next, fileSize, cfg); err != nil {
			return report, err
		}
		if position >= durable.position {
			break
		}
		if durable.checkpoint && s.allZero(position, durable.position) {
			report.staleCheckpoint = true // the point names bytes that were never written
			break
		}
		resume, ok := s.resync(position, next, durable, landmarks)
		if !ok && durable.checkpoint {
			report.staleCheckpoint = true // the point contradicts the data
			break
		}
		if !ok {
			return report, fmt.Errorf("%w: %s: bytes from %d (offset %d) are not valid batches, the segment is durable up to %d, and no later batch boundary checks out",
				ErrCorrupt, s.dataPath, position, next, durable.position)
		}
		damaged = append(damaged, damage{position: position, endPosition: resume.Position, firstOffset: next, endOffset: resume.Offset})
		position, next = resume.Position, resume.Offset
	}
	if durable.end && next != durable.offset {
		if next > durable.offset {
			return report, fmt.Errorf("%w: %s holds offsets up to %d, beyond the next segment's base %d", ErrCorrupt, s.dataPath, next-1, durable.offset)
		}
		// Whole batches are missing at the end: the file lost its tail.
		damaged = append(damaged, damage{position: position, endPosition: position, firstOffset: next, endOffset: durable.offset})
		next = durable.offset
	}
	report.damage = damaged[len(keep):]
	if len(damaged) == 0 {
		damaged = nil
	}
	s.extent.Store(&extent{size: position, nextOffset: next, damage: damaged})
	return report, nil
}

// scanValid indexes the valid batches with dense offsets from position (holding offset next) and
// returns the position and offset of the first thing that is not one, or of the file's end. It reads
// 64 KiB first, doubling up to recoveryChunk while batches go on, so that a scan of a short tail does
// not read megabytes of the preallocated space after it.
func (s *segment) scanValid(position, next, fileSize int64, cfg *Config) (int64, int64, error) {
	var buf []byte
	readSize := int64(64 << 10)
	for position < fileSize {
		want := min(readSize, fileSize-position)
		if int64(cap(buf)) < want {
			buf = make([]byte, want)
		}
		n, err := s.file.ReadAt(buf[:want], position)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("segment: read %s at %d: %w", s.dataPath, position, err)
		}
		chunk := buf[:n]
		consumed := 0
		for {
			rest := chunk[consumed:]
			h, err := batch.Validate(rest)
			if err == nil && h.BaseOffset == next {
				if err := s.indexBatch(h, position+int64(consumed), cfg); err != nil {
					return 0, 0, fmt.Errorf("segment: rebuild index of %s: %w", s.dataPath, err)
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
					readSize = max(min(2*readSize, recoveryChunk), need)
					break
				}
			}
			return position + int64(consumed), next, nil // the first byte that is not a valid next batch
		}
		position += int64(consumed)
	}
	return position, next, nil
}

// resync finds where valid batches resume after the bytes at position (which should have held
// offset next) failed validation below the durable point. Candidates, nearest first: the end of the
// damaged batch by its own length and offset delta (which a flipped bit in its records leaves
// intact), the offset index entries after it, and the durable point. A candidate before the durable
// point counts only when a valid batch with its offset starts there.
func (s *segment) resync(position, next int64, durable durablePoint, landmarks []index.OffsetEntry) (index.OffsetEntry, bool) {
	var candidates []index.OffsetEntry
	var header [batch.HeaderSize]byte
	if n, _ := s.file.ReadAt(header[:], position); n == len(header) {
		length := int64(int32(binary.BigEndian.Uint32(header[8:])))
		delta := int64(int32(binary.BigEndian.Uint32(header[23:])))
		if length >= batch.MinBatchLength && delta >= 0 {
			candidates = append(candidates, index.OffsetEntry{Offset: next + delta + 1, Position: position + batch.LengthPrefix + length})
		}
	}
	for _, e := range landmarks {
		if e.Position > position && e.Offset >= next {
			candidates = append(candidates, e)
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool { return candidates[i].Position < candidates[j].Position })
	if durable.offset >= next {
		candidates = append(candidates, index.OffsetEntry{Offset: durable.offset, Position: durable.position})
	}
	for _, c := range candidates {
		switch {
		case c.Position == durable.position && c.Offset == durable.offset:
			return c, true
		case c.Position < durable.position && s.batchAt(c.Position, c.Offset):
			return c, true
		}
	}
	return index.OffsetEntry{}, false
}

// allZero reports whether the file holds only zeroes (or nothing) in [from, to).
func (s *segment) allZero(from, to int64) bool {
	buf := make([]byte, min(to-from, recoveryChunk))
	for from < to {
		n, err := s.file.ReadAt(buf[:min(to-from, int64(len(buf)))], from)
		for _, b := range buf[:n] {
			if b != 0 {
				return false
			}
		}
		if err != nil || n == 0 {
			return true
		}
		from += int64(n)
	}
	return true
}

// reopenActive prepares the last segment for appends: its file cut to the logical end, dropping any
// torn tail. Its first append preallocates again.
func (s *segment) reopenActive(cfg *Config) error {
	size := s.size()
	if s.allocated != size {
		if err := s.file.Truncate(size); err != nil {
			return fmt.Errorf("segment: cut %s at %d: %w", s.dataPath, size, err)
		}
		s.allocated = size
	}
	if size > 0 {
		s.firstAppend = cfg.now() // age is counted from reopening: Kafka does the same
	}
	return nil
}

// pointAtEnd is a recovery point at the segment's logical end, recording its time index as it is
// now. The caller holds appendMu and has just written every index entry to the file (Flush or Seal).
func (s *segment) pointAtEnd() recoveryPoint {
	p := recoveryPoint{segmentBase: s.baseOffset, position: s.size(), nextOffset: s.nextOffset(), timeEntries: int64(s.times.Len())}
	p.lastTime, _ = s.times.Last()
	return p
}
