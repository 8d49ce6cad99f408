package index

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TimeEntry says that the batches before Offset all have max timestamps below Timestamp, and that the
// batch at Offset reaches it (Timestamp is the largest timestamp seen up to and including that batch).
type TimeEntry struct {
	Timestamp int64
	Offset    int64
}

// TimeIndex is the sparse time index of one segment.
type TimeIndex struct {
	baseOffset int64
	table      *table[TimeEntry]
}

type timeCodec struct{ baseOffset int64 }

func (timeCodec) size() int { return 12 }

func (c timeCodec) encode(dst []byte, e TimeEntry) {
	binary.BigEndian.PutUint64(dst, uint64(e.Timestamp))
	binary.BigEndian.PutUint32(dst[8:], uint32(e.Offset-c.baseOffset))
}

func (c timeCodec) decode(src []byte) TimeEntry {
	return TimeEntry{
		Timestamp: int64(binary.BigEndian.Uint64(src)),
		Offset:    c.baseOffset + int64(binary.BigEndian.Uint32(src[8:])),
	}
}

func (timeCodec) follows(prev, next TimeEntry) bool {
	return next.Timestamp > prev.Timestamp && next.Offset > prev.Offset
}

// TimeEntrySize is the on-disk size of one time index entry.
const TimeEntrySize = 12

// OpenTimeIndex opens (creating if needed) the time index at path, loading its longest valid prefix.
func OpenTimeIndex(path string, baseOffset int64, maxEntries int) (*TimeIndex, error) {
	t, err := openTable(path, maxEntries, timeCodec{baseOffset: baseOffset}, func(e TimeEntry) bool {
		return e.Timestamp > 0 // zeroed space and pre-1970 stamps are not entries
	})
	if err != nil {
		return nil, err
	}
	return &TimeIndex{baseOffset: baseOffset, table: t}, nil
}

// MaybeAppend adds an entry when timestamp exceeds the last entry's (and offset too); otherwise it
// does nothing. It reports whether it added.
func (x *TimeIndex) MaybeAppend(timestamp, offset int64) (bool, error) {
	if offset < x.baseOffset || offset-x.baseOffset > math.MaxUint32 {
		return false, fmt.Errorf("%w: offset %d for base %d", ErrOutOfSegment, offset, x.baseOffset)
	}
	if last, ok := x.table.last(); ok && (timestamp <= last.Timestamp || offset <= last.Offset) {
		return false, nil
	}
	if timestamp <= 0 {
		return false, nil
	}
	return true, x.table.appendEntry(TimeEntry{Timestamp: timestamp, Offset: offset})
}

// Lookup returns the offset from which a forward scan finds the first batch whose max timestamp is at
// or above timestamp: the offset of the last entry with a timestamp below it, or the segment base.
func (x *TimeIndex) Lookup(timestamp int64) int64 {
	e, ok := x.table.search(func(e TimeEntry) bool { return e.Timestamp < timestamp })
	if !ok {
		return x.baseOffset
	}
	return e.Offset
}

// TruncateFromOffset drops every entry at or after offset.
func (x *TimeIndex) TruncateFromOffset(offset int64) error {
	return x.table.truncate(func(e TimeEntry) bool { return e.Offset < offset })
}

// Last returns the newest entry, if any: its timestamp is the segment's largest indexed timestamp.
func (x *TimeIndex) Last() (TimeEntry, bool) { return x.table.last() }

// Len is the number of entries.
func (x *TimeIndex) Len() int { return x.table.length() }

// Full reports whether another entry would not fit.
func (x *TimeIndex) Full() bool { return x.table.full() }

// Unwritten reports whether some entries are not in the file yet (Flush or Seal writes them).
func (x *TimeIndex) Unwritten() bool { return x.table.unwritten() }

// Flush writes unwritten entries to the file without fsync.
func (x *TimeIndex) Flush() error { return x.table.flush() }

// Seal writes all entries, trims the file and fsyncs it.
func (x *TimeIndex) Seal() error { return x.table.seal() }

// Close closes the file.
func (x *TimeIndex) Close() error { return x.table.close() }

// Remove closes and deletes the file.
func (x *TimeIndex) Remove() error { return x.table.remove() }

// Entries returns a copy of all entries, oldest first.
func (x *TimeIndex) Entries() []TimeEntry {
	x.table.mu.RLock()
	defer x.table.mu.RUnlock()
	return append([]TimeEntry(nil), x.table.mu.entries...)
}

// Trimmed reports whether OpenTimeIndex found a torn, zeroed or corrupt tail after the valid prefix
// (and cut it off): entries were lost, so the owner should rebuild them.
func (x *TimeIndex) Trimmed() bool { return x.table.trimmed }
