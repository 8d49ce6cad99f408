package segment

import (
	"fmt"
	"os"
	"sort"
)

// Slice is a byte range of a segment file holding whole batches, ready to be sent with sendfile.
// The file stays open at least Config.FileDeleteDelay after the segment leaves the log.
type Slice struct {
	File        *os.File
	Position    int64
	Size        int64
	FirstOffset int64 // base offset of the first batch in the range
}

// Slice returns the batches from the one holding offset onwards, ending at a batch boundary, within
// maxBytes but always holding at least one whole batch (KIP-74), and holding no batch that starts at
// or after upTo (the high watermark). Reads do not cross segments: a range ends at its segment's end.
// An offset equal to the log end, or at or above upTo, gives an empty Slice. An offset below the log
// start or above the log end gives ErrOffsetOutOfRange.
func (l *Log) Slice(offset, maxBytes, upTo int64) (Slice, error) {
	segments := l.segmentList()
	logStart, logEnd := l.logStartOffset.Load(), segments[len(segments)-1].nextOffset.Load()
	if offset < logStart || offset > logEnd {
		return Slice{}, fmt.Errorf("%w: offset %d not in [%d, %d] of %s", ErrOffsetOutOfRange, offset, logStart, logEnd, l.dir)
	}
	if offset == logEnd || offset >= upTo {
		return Slice{}, nil
	}
	i := sort.Search(len(segments), func(i int) bool { return segments[i].baseOffset > offset }) - 1
	if i < 0 {
		return Slice{}, fmt.Errorf("%w: offset %d below first segment of %s", ErrOffsetOutOfRange, offset, l.dir)
	}
	s := segments[i]
	// The writer publishes size before nextOffset and both only grow, so loading nextOffset first
	// gives a size that covers every offset below it.
	segmentNext := s.nextOffset.Load()
	limit := s.size.Load()
	if offset >= segmentNext {
		// Truncation raced with this read; nothing here holds the offset.
		return Slice{}, nil
	}
	r := newHeaderReader(s.file, limit)
	position, first, err := s.positionOf(r, offset)
	if err != nil {
		return Slice{}, err
	}
	// The range ends before the batch holding upTo...
	if upTo < segmentNext {
		// When upTo lies inside a batch, that batch is not wholly below the mark and is left out too.
		upToPosition, _, err := s.positionOf(r, upTo)
		if err != nil {
			return Slice{}, err
		}
		limit = upToPosition
		if limit <= position {
			return Slice{}, nil
		}
	}
	// ...and at the last batch boundary within the budget, starting from an indexed boundary.
	end := position + int64(first.Size())
	budgetEnd := limit
	if maxBytes < limit-position { // compared as a distance: position+maxBytes overflows for huge budgets
		budgetEnd = position + maxBytes
	}
	if budgetEnd > end {
		scan := end
		// Skip ahead to an index entry within the budget, if the batch there is the one it names.
		if entry := s.offsets.LookupPosition(budgetEnd); entry.Position > end {
			if h, err := r.at(entry.Position); err == nil && h.BaseOffset == entry.Offset {
				scan = entry.Position
			}
		}
		for scan < budgetEnd {
			h, err := r.at(scan)
			if err != nil || scan+int64(h.Size()) > budgetEnd {
				break
			}
			scan += int64(h.Size())
		}
		end = scan
	}
	return Slice{File: s.file, Position: position, Size: end - position, FirstOffset: first.BaseOffset}, nil
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
// false when no batch reaches the timestamp.
func (l *Log) OffsetForTimestamp(timestamp int64) (offset, batchTimestamp int64, found bool, err error) {
	for _, s := range l.segmentList() {
		if s.maxTimestamp.Load() < timestamp {
			continue
		}
		segmentNext := s.nextOffset.Load() // before size, as in Slice
		limit := s.size.Load()
		if limit == 0 {
			continue
		}
		from := max(s.times.Lookup(timestamp), l.logStartOffset.Load())
		if from >= segmentNext {
			// The entry is for a batch being appended (indexed before it is published): no
			// published batch here reaches the timestamp.
			continue
		}
		r := newHeaderReader(s.file, limit)
		position, _, err := s.positionOf(r, from)
		if err != nil {
			return 0, 0, false, err
		}
		for position < limit {
			h, err := r.at(position)
			if err != nil {
				return 0, 0, false, fmt.Errorf("segment %d: time scan: %w", s.baseOffset, err)
			}
			if h.MaxTimestamp >= timestamp {
				return h.BaseOffset, h.MaxTimestamp, true, nil
			}
			position += int64(h.Size())
		}
	}
	return 0, 0, false, nil
}
