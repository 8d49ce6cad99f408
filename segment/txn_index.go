package segment

// The aborted-transaction index (Kafka's .txnindex): one file per segment, beside its .log, named
// after the segment's base offset, holding one entry per transaction aborted by a marker in that
// segment. read_committed fetches list the aborted transactions that overlap what they return, so
// consumers can drop those records.
//
// Entry layout (34 bytes, big-endian, Kafka's AbortedTxn version 0):
//
//	+--------+------------------------------------------------------------+
//	| offset | field                                                      |
//	+--------+------------------------------------------------------------+
//	| 0-1    | version (0)                                                |
//	| 2-9    | producer id                                                |
//	| 10-17  | first offset: the transaction's first batch in the partition |
//	| 18-25  | last offset: the abort marker's offset                     |
//	| 26-33  | last stable offset when the marker was written             |
//	+--------+------------------------------------------------------------+
//
// The files are append-only. A torn trailing entry (a crash mid-write) is cut when the index opens.
// The index is derived data: its owner rebuilds the entries from a given offset on by rescanning
// the log (TruncateFrom, then Append), which is how recovery restores it after a crash.
// Invariant: entries are held in LastOffset order, each in the file of the segment holding
// LastOffset.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sluice-mq/sluice/batch"
)

const (
	txnIndexSuffix    = ".txnindex"
	txnIndexEntrySize = 34
)

// AbortedTxn is one aborted transaction of a partition.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// TxnIndex is a partition's aborted-transaction index. It is safe for concurrent use.
type TxnIndex struct {
	log *Log
	mu  struct {
		sync.RWMutex
		// entries are every entry of every file, in LastOffset order.
		entries []AbortedTxn
	}
}

// OpenTxnIndex reads the .txnindex files in the log's directory.
func (l *Log) OpenTxnIndex() (*TxnIndex, error) {
	x := &TxnIndex{log: l}
	dirEntries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("segment: list %s: %w", l.dir, err)
	}
	var names []string
	for _, e := range dirEntries {
		if stem, ok := strings.CutSuffix(e.Name(), txnIndexSuffix); ok {
			if _, isSegment := parseSegmentName(stem + dataSuffix); isSegment {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names) // zero-padded base offsets: name order is offset order
	for _, name := range names {
		path := filepath.Join(l.dir, name)
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("segment: read %s: %w", path, err)
		}
		whole := len(raw) - len(raw)%txnIndexEntrySize
		if whole != len(raw) {
			if err := os.Truncate(path, int64(whole)); err != nil {
				return nil, fmt.Errorf("segment: cut torn entry of %s: %w", path, err)
			}
		}
		for position := 0; position < whole; position += txnIndexEntrySize {
			x.mu.entries = append(x.mu.entries, decodeAbortedTxn(raw[position:]))
		}
	}
	slices.SortStableFunc(x.mu.entries, func(a, b AbortedTxn) int { return compareInt64(a.LastOffset, b.LastOffset) })
	return x, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func decodeAbortedTxn(b []byte) AbortedTxn {
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}
}

func appendAbortedTxn(dst []byte, e AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(e.LastStableOffset))
}

// segmentBaseFor is the base offset of the segment holding offset (the last one starting at or
// before it).
func (l *Log) segmentBaseFor(offset int64) int64 {
	segments := l.segmentList()
	base := segments[0].baseOffset
	for _, s := range segments {
		if s.baseOffset <= offset {
			base = s.baseOffset
		}
	}
	return base
}

// Append adds an entry, written to the file of the segment holding its LastOffset. Entries must be
// appended in LastOffset order. It does not fsync: a lost entry is rebuilt from the log.
func (x *TxnIndex) Append(e AbortedTxn) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.mu.entries); n > 0 && x.mu.entries[n-1].LastOffset >= e.LastOffset {
		return fmt.Errorf("segment: aborted transaction at %d appended after one at %d", e.LastOffset, x.mu.entries[n-1].LastOffset)
	}
	path := segmentName(x.log.dir, x.log.segmentBaseFor(e.LastOffset), txnIndexSuffix)
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("segment: open %s: %w", path, err)
	}
	_, err = file.Write(appendAbortedTxn(nil, e))
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("segment: write %s: %w", path, err)
	}
	x.mu.entries = append(x.mu.entries, e)
	return nil
}

// Aborted lists the aborted transactions overlapping [from, upTo): those whose marker is at or
// after from and whose first offset is below upTo, in marker order.
func (x *TxnIndex) Aborted(from, upTo int64) []AbortedTxn {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(x.mu.entries, from, func(e AbortedTxn, offset int64) int { return compareInt64(e.LastOffset, offset) })
	var out []AbortedTxn
	for _, e := range x.mu.entries[i:] {
		if e.FirstOffset < upTo {
			out = append(out, e)
		}
	}
	return out
}

// Len is the number of entries.
func (x *TxnIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.mu.entries)
}

// TruncateFrom drops every entry whose marker is at or after offset, from memory and files, so
// that a rescan of the log from offset can append them again.
func (x *TxnIndex) TruncateFrom(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	keep := len(x.mu.entries)
	for keep > 0 && x.mu.entries[keep-1].LastOffset >= offset {
		keep--
	}
	if keep == len(x.mu.entries) {
		return nil
	}
	x.mu.entries = x.mu.entries[:keep]
	return x.rewriteLocked()
}

// Prune drops entries whose segment is gone (retention) and entries entirely below the log start.
func (x *TxnIndex) Prune() error {
	start := x.log.LogStartOffset()
	x.mu.Lock()
	defer x.mu.Unlock()
	kept := x.mu.entries[:0:0]
	for _, e := range x.mu.entries {
		if e.LastOffset >= start {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(x.mu.entries) {
		return nil
	}
	x.mu.entries = kept
	return x.rewriteLocked()
}

// rewriteLocked replaces every .txnindex file with the entries held.
func (x *TxnIndex) rewriteLocked() error {
	files := map[string][]byte{}
	for _, e := range x.mu.entries {
		path := segmentName(x.log.dir, x.log.segmentBaseFor(e.LastOffset), txnIndexSuffix)
		files[path] = appendAbortedTxn(files[path], e)
	}
	dirEntries, err := os.ReadDir(x.log.dir)
	if err != nil {
		return fmt.Errorf("segment: list %s: %w", x.log.dir, err)
	}
	var errs []error
	for _, e := range dirEntries {
		path := filepath.Join(x.log.dir, e.Name())
		if strings.HasSuffix(e.Name(), txnIndexSuffix) && files[path] == nil {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	for path, raw := range files {
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segment: rewrite aborted transaction index: %w", err)
	}
	return nil
}

// ScanHeaders calls fn with the header of every batch from the one holding from up to the last one
// starting below upTo, in offset order, and with the whole batch for control batches (transaction
// markers; nil otherwise). It reads headers only, through the same windowed reader as fetches, so
// rebuilding transaction state costs far less than reading the data. It stops at fn's first error.
func (l *Log) ScanHeaders(from, upTo int64, fn func(h batch.Header, control []byte) error) error {
	for offset := from; offset < upTo; {
		slice, err := l.Slice(offset, 64<<20, upTo)
		if err != nil {
			return err
		}
		if slice.Size == 0 {
			return nil
		}
		end := slice.Position + slice.Size
		r := newHeaderReader(slice.File, end)
		for position := slice.Position; position < end; {
			h, err := r.at(position)
			if err != nil {
				return l.readError(err)
			}
			var control []byte
			if h.IsControl() {
				control = make([]byte, h.Size())
				if _, err := slice.File.ReadAt(control, position); err != nil {
					return l.readError(fmt.Errorf("segment: read control batch at %d: %w", position, err))
				}
			}
			if err := fn(h, control); err != nil {
				return err
			}
			position += int64(h.Size())
			offset = h.NextOffset()
		}
	}
	return nil
}
