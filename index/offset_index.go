package index

import (
	"encoding/binary"
	"fmt"
	"math"
)

// OffsetEntry says that the batch holding Offset starts at byte Position of the segment (Offset is
// the batch's base offset when the entry was added).
type OffsetEntry struct {
	Offset   int64
	Position int64
}

// OffsetIndex is the sparse offset index of one segment.
type OffsetIndex struct {
	baseOffset int64
	table      *table[OffsetEntry]
}

type offsetCodec struct{ baseOffset int64 }

func (offsetCodec) size() int { return 8 }

func (c offsetCodec) encode(dst []byte, e OffsetEntry) {
	binary.BigEndian.PutUint32(dst, uint32(e.Offset-c.baseOffset))
	binary.BigEndian.PutUint32(dst[4:], uint32(e.Position))
}

func (c offsetCodec) decode(src []byte) OffsetEntry {
	return OffsetEntry{
		Offset:   c.baseOffset + int64(binary.BigEndian.Uint32(src)),
		Position: int64(binary.BigEndian.Uint32(src[4:])),
	}
}

func (offsetCodec) follows(prev, next OffsetEntry) bool {
	return next.Offset > prev.Offset && next.Position > prev.Position
}

// OffsetEntrySize is the on-disk size of one offset index entry.
const OffsetEntrySize = 8

// OpenOffsetIndex opens (creating if needed) the offset index at path for a segment starting at
// baseOffset, loading its longest valid prefix. maxEntries bounds the table (the segment rolls when
// it is full).
func OpenOffsetIndex(path string, baseOffset int64, maxEntries int) (*OffsetIndex, error) {
	c := offsetCodec{baseOffset: baseOffset}
	first := true
	t, err := openTable(path, maxEntries, c, func(e OffsetEntry) bool {
		// Zeroed space decodes as (base, 0): legal only as the very first entry.
		ok := first || e.Offset != baseOffset || e.Position != 0
		first = false
		return ok
	})
	if err != nil {
		return nil, err
	}
	return &OffsetIndex{baseOffset: baseOffset, table: t}, nil
}

// Append adds an entry; offset and position must exceed the last entry's.
func (x *OffsetIndex) Append(offset, position int64) error {
	if offset < x.baseOffset || offset-x.baseOffset > math.MaxUint32 || position < 0 || position > math.MaxUint32 {
		return fmt.Errorf("%w: offset %d position %d for base %d", ErrOutOfSegment, offset, position, x.baseOffset)
	}
	return x.table.appendEntry(OffsetEntry{Offset: offset, Position: position})
}

// Lookup returns the last entry whose offset is at or below offset. Without one it returns the
// segment start (base offset, position 0), where a scan may always begin.
func (x *OffsetIndex) Lookup(offset int64) OffsetEntry {
	e, ok := x.table.search(func(e OffsetEntry) bool { return e.Offset <= offset })
	if !ok {
		return OffsetEntry{Offset: x.baseOffset}
	}
	return e
}

// LookupPosition returns the last entry whose position is at or below position, or the segment start.
func (x *OffsetIndex) LookupPosition(position int64) OffsetEntry {
	e, ok := x.table.search(func(e OffsetEntry) bool { return e.Position <= position })
	if !ok {
		return OffsetEntry{Offset: x.baseOffset}
	}
	return e
}

// TruncateFromPosition drops every entry at or after position.
func (x *OffsetIndex) TruncateFromPosition(position int64) error {
	return x.table.truncate(func(e OffsetEntry) bool { return e.Position < position })
}

// Entries returns a copy of all entries, oldest first.
func (x *OffsetIndex) Entries() []OffsetEntry {
	x.table.mu.RLock()
	defer x.table.mu.RUnlock()
	return append([]OffsetEntry(nil), x.table.mu.entries...)
}

// Last returns the newest entry, if any.
func (x *OffsetIndex) Last() (OffsetEntry, bool) { return x.table.last() }

// Len is the number of entries.
func (x *OffsetIndex) Len() int { return x.table.length() }

// Full reports whether Append would fail with ErrFull.
func (x *OffsetIndex) Full() bool { return x.table.full() }

// Unwritten reports whether some entries are not in the file yet (Flush or Seal writes them).
func (x *OffsetIndex) Unwritten() bool { return x.table.unwritten() }

// Flush writes unwritten entries to the file without fsync.
func (x *OffsetIndex) Flush() error { return x.table.flush() }

// Seal writes all entries, trims the file and fsyncs it.
func (x *OffsetIndex) Seal() error { return x.table.seal() }

// Close closes the file (call Seal first to keep the entries).
func (x *OffsetIndex) Close() error { return x.table.close() }

// Remove closes and deletes the file.
func (x *OffsetIndex) Remove() error { return x.table.remove() }
