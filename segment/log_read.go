package segment

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/sluice-mq/sluice/batch"
)

// Slice is a byte range of a segment file holding whole batches, ready to be sent with sendfile.
// The file stays open at least Config.FileDeleteDelay after the segment leaves the log.
type Slice struct {
	File        *os.File
	Position    int64
	Size        int64
	FirstOffset int64 // base offset of the first batch in the range
	NextOffset  int64 // offset after the last batch in the range; 0 when the range is empty
}

// Slice returns the batches from the one holding offset onwards, ending at a batch boundary, within
// maxBytes but always holding at least one whole batch (KIP-74), and holding no batch that starts at
// or after upTo (the high watermark). Reads do not cross segments: a range ends at its segment's end,
// and before any damaged range. An offset equal to the log end, or at or above upTo, gives an empty
// Slice. An offset below the log start or above the log end gives ErrOffsetOutOfRange; an offset that
// recovery found damaged, or a batch header that does not check out on the way to it, ErrCorrupt.
func (l *Log) Slice(offset, maxBytes, upTo int64) (Slice, error) {
	view := l.view.Load()
	segments := view.segments
	logEnd := segments[len(segments)-1].nextOffset()
	if offset < view.logStartOffset || offset > logEnd {
		return Slice{}, fmt.Errorf("%w: offset %d not in [%d, %d] of %s", ErrOffsetOutOfRange, offset, view.logStartOffset, logEnd, l.dir)
	}
	if offset == logEnd || offset >= upTo {
		return Slice{}, nil
	}
	// The first segment starts at the log start (logView), so one holds the offset.
	s := segments[sort.Search(len(segments), func(i int) bool { return segments[i].baseOffset > offset })-1]
	// One load: the size and next offset read together, so every batch within size is below
	// nextOffset, and nothing at or beyond upTo can slip in (upTo <= nextOffset below).
	e := s.loadExtent()
	if offset >= e.nextOffset {
		// Truncation raced with this read; nothing here holds the offset.
		return Slice{}, nil
	}
	run, damaged := e.runOf(s.baseOffset, offset)
	if damaged != nil {
		err := fmt.Errorf("%w: offset %d of %s lies in segment %d's damaged %s", ErrCorrupt, offset, l.dir, s.baseOffset, damaged)
		l.noteReadCorrupt(err)
		return Slice{}, err
	}
	limit := run.endPosition
	r := newHeaderReader(s.file, limit)
	position, first, err := s.positionOf(r, offset, run.start)
	if err != nil {
		return Slice{}, l.readError(err)
	}
	// The range ends before the batch holding upTo...
	if upTo < run.endOffset {
		// When upTo lies inside a batch, that batch is not wholly below the mark and is left out too.
		upToPosition, _, err := s.positionOf(r, upTo, run.start)
		if err != nil {
			// A damaged header between the two: the first batch alone may still be served.
			return l.sliceOneBatch(s, position, first, upTo, run, err)
		}
		limit = upToPosition
		if limit <= position {
			return Slice{}, nil
		}
	}
	// ...and at the last batch boundary within the budget, starting from an indexed boundary. A
	// boundary counts only when confirmed: the end of the run, or a header there with the offset the
	// batch before it ends at. So a batch whose length or offset delta was damaged below what recovery
	// verified is never served as whole, nor are the bytes after it.
	end, next := position+int64(first.Size()), first.NextOffset()
	if !boundary(r, end, next, limit) {
		return l.sliceOneBatch(s, position, first, upTo, run, fmt.Errorf("segment %d: batch at %d (offset %d) does not end where a batch with offset %d starts: %w",
			s.baseOffset, position, first.BaseOffset, first.NextOffset(), batch.ErrCorrupt))
	}
	budgetEnd := limit
	if maxBytes < limit-position { // compared as a distance: position+maxBytes overflows for huge budgets
		budgetEnd = position + maxBytes
	}
	if budgetEnd > end {
		scan := end
		// Skip ahead to an index entry within the budget, if the batch there is the one it names.
		if entry := s.offsets.LookupPosition(budgetEnd); entry.Position > end && boundary(r, entry.Position, entry.Offset, limit) {
			scan, next = entry.Position, entry.Offset
		}
		for scan < budgetEnd {
			h, err := r.at(scan)
			if err != nil || scan+int64(h.Size()) > budgetEnd || !boundary(r, scan+int64(h.Size()), h.NextOffset(), limit) {
				break
			}
			scan += int64(h.Size())
			next = h.NextOffset()
		}
		end = scan
	}
	return Slice{File: s.file, Position: position, Size: end - position, FirstOffset: first.BaseOffset, NextOffset: next}, nil
}

// sliceOneBatch is Slice when the header after the first batch does not confirm where that batch
// ends (damage recovery did not scan: it verifies only the tails of segments and, after a crash, what
// follows the recovery point). The first batch is served alone when all of it checks out (structure,
// CRC, the offsets its header claims) and lies wholly below upTo, so reads reach every intact batch
// up to the damage; otherwise the read fails with cause, as ErrCorrupt.
func (l *Log) sliceOneBatch(s *segment, position int64, first batch.Header, upTo int64, run run, cause error) (Slice, error) {
	end := position + int64(first.Size())
	if first.LastOffset() >= upTo {
		return Slice{}, nil // not wholly below the mark: left out, as on the ordinary path
	}
	if end <= run.endPosition {
		raw := make([]byte, first.Size())
		if _, err := s.file.ReadAt(raw, position); err == nil {
			if h, err := batch.Validate(raw); err == nil && h.BaseOffset == first.BaseOffset && h.Size() == first.Size() {
				return Slice{File: s.file, Position: position, Size: end - position, FirstOffset: first.BaseOffset, NextOffset: first.NextOffset()}, nil
			}
		}
	}
	return Slice{}, l.readError(cause)
}

// boundary reports whether a batch with offset next starts at position, or position is the limit.
func boundary(r *headerReader, position, next, limit int64) bool {
	if position == limit {
		return true
	}
	h, err := r.at(position)
	return err == nil && h.BaseOffset == next
}

// readError classifies an error met walking batch headers within a segment's published extent:
// bytes that do not parse there are damage recovery did not scan (it verifies only the tails of
// segments), reported as ErrCorrupt; anything else (an I/O error) is returned as it is.
func (l *Log) readError(err error) error {
	if errors.Is(err, batch.ErrCorrupt) || errors.Is(err, batch.ErrTruncated) || errors.Is(err, batch.ErrUnsupportedMagic) {
		err = fmt.Errorf("%w: %s: %w", ErrCorrupt, l.dir, err)
		l.noteReadCorrupt(err)
	}
	return err
}

// Read copies what Slice(offset, maxBytes, upTo) names into dst (grown as needed) and returns it.
func (l *Log) Read(offset, maxBytes, upTo int64, dst []byte) ([]byte, error) {
	slice, err := l.Slice(offset, maxBytes, upTo)
	if err != nil || slice.Size == 0 {
		return dst[:0], err
	}
	if int64(cap(dst)) < slice.Size {
		dst = make([]byte, slice.Size)
	}
	dst = dst[:slice.Size]
	if _, err := slice.File.ReadAt(dst, slice.Position); err != nil {
		return dst[:0], fmt.Errorf("segment: read %d bytes at %d of %s: %w", slice.Size, slice.Position, l.dir, err)
	}
	return dst, nil
}

// OffsetForTimestamp finds the first batch whose max timestamp is at or above timestamp and returns
// its base offset and max timestamp (Kafka's ListOffsets by time, at batch granularity). found is
// false when no batch reaches the timestamp. Damaged ranges are skipped.
func (l *Log) OffsetForTimestamp(timestamp int64) (offset, batchTimestamp int64, found bool, err error) {
	view := l.view.Load()
	for _, s := range view.segments {
		if s.maxTimestamp.Load() < timestamp {
			continue
		}
		e := s.loadExtent()
		from := max(s.times.Lookup(timestamp), view.logStartOffset)
		if from >= e.nextOffset {
			// The entry is for a batch being appended (indexed before it is published): no
			// published batch here reaches the timestamp.
			continue
		}
		for k := 0; k <= len(e.damage); k++ {
			run := e.run(s.baseOffset, k)
			if run.endOffset <= from || run.endPosition <= run.start.Position {
				continue
			}
			r := newHeaderReader(s.file, run.endPosition)
			position, _, err := s.positionOf(r, max(from, run.start.Offset), run.start)
			if err != nil {
				return 0, 0, false, l.readError(err)
			}
			for position < run.endPosition {
				h, err := r.at(position)
				if err != nil {
					return 0, 0, false, l.readError(fmt.Errorf("segment %d: time scan: %w", s.baseOffset, err))
				}
				if h.MaxTimestamp >= timestamp {
					return h.BaseOffset, h.MaxTimestamp, true, nil
				}
				position += int64(h.Size())
			}
		}
	}
	return 0, 0, false, nil
}
