package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
)

// Moving the log start forward (Kafka's DeleteRecords).
//
// AdvanceLogStart sets the log start offset to an offset that may lie inside a segment: reads below it
// fail with ErrOffsetOutOfRange, a read at it gets the batch holding it (which may begin before it,
// as on Kafka; clients skip the records before the offset they asked for). Whole segments below it go
// (not the active one). The start survives restarts in the file log-start-offset (20 bytes,
// big-endian: the offset (8), the base offset of the segment holding it (8), CRC-32C of the 16 bytes
// before (4)), written to a temporary name, fsynced and renamed before the new start is published.
// Open uses it when that segment is still the first one, and ignores it otherwise (retention or a
// later advance deleted the segment since, and the first segment's base is the start).
//
// Invariant: segments[0].baseOffset <= logStartOffset <= segments[0].nextOffset.
const logStartFile = "log-start-offset"

// AdvanceLogStart moves the log start forward to offset and deletes the segments wholly below it. An
// offset at or below the current start changes nothing; one above the log end is
// ErrOffsetOutOfRange. It returns the log start after the call.
func (l *Log) AdvanceLogStart(offset int64) (int64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	view := l.view.Load()
	segments := view.segments
	if offset <= view.logStartOffset {
		return view.logStartOffset, nil
	}
	if end := segments[len(segments)-1].nextOffset(); offset > end {
		return view.logStartOffset, fmt.Errorf("%w: log start %d beyond the log end %d of %s", ErrOffsetOutOfRange, offset, end, l.dir)
	}
	// The first segment to keep: the one holding offset, or the active one.
	keep := sort.Search(len(segments), func(i int) bool { return segments[i].nextOffset() > offset })
	keep = min(keep, len(segments)-1)
	if err := writeLogStart(l.dir, offset, segments[keep].baseOffset); err != nil {
		return view.logStartOffset, err
	}
	remaining := append([]*segment(nil), segments[keep:]...)
	l.view.Store(&logView{segments: remaining, logStartOffset: offset})
	var errs []error
	for _, s := range segments[:keep] {
		errs = append(errs, l.retireLocked(s))
	}
	if keep > 0 {
		errs = append(errs, syncDir(l.dir))
	}
	return offset, errors.Join(errs...)
}

func writeLogStart(dir string, offset, segmentBase int64) error {
	raw := binary.BigEndian.AppendUint64(nil, uint64(offset))
	raw = binary.BigEndian.AppendUint64(raw, uint64(segmentBase))
	raw = binary.BigEndian.AppendUint32(raw, crc32.Checksum(raw, castagnoli))
	temp := filepath.Join(dir, logStartFile+".tmp")
	f, err := os.Create(temp)
	if err != nil {
		return fmt.Errorf("segment: write %s: %w", temp, err)
	}
	_, err = f.Write(raw)
	if err = errors.Join(err, f.Sync(), f.Close()); err == nil {
		err = os.Rename(temp, filepath.Join(dir, logStartFile))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("segment: write %s in %s: %w", logStartFile, dir, err)
	}
	return nil
}

// loadLogStart returns the log start of a log whose first segment is first: the recorded one when it
// lies in that segment, else the segment's base.
func loadLogStart(dir string, first *segment) int64 {
	raw, err := os.ReadFile(filepath.Join(dir, logStartFile))
	if err != nil || len(raw) != 20 || crc32.Checksum(raw[:16], castagnoli) != binary.BigEndian.Uint32(raw[16:]) {
		return first.baseOffset
	}
	offset, base := int64(binary.BigEndian.Uint64(raw)), int64(binary.BigEndian.Uint64(raw[8:]))
	if base != first.baseOffset || offset < first.baseOffset || offset > first.nextOffset() {
		return first.baseOffset
	}
	return offset
}
