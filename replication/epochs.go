package replication

// The epoch history of a replica: the start offset of every leader epoch that wrote to its log.
//
// File leader-epochs in the partition directory, text, rewritten whole (temporary file, fsync,
// rename, directory fsync) on every change, which happens once per leader change, never per append:
//
//	sluice-leader-epochs 1      format line
//	<epoch> <start offset>      one line per epoch, epochs and offsets ascending
//
// Invariant: entries are strictly ascending in epoch and non-decreasing in start offset, and no
// entry starts beyond the log end.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

const epochFileName = "leader-epochs"
const epochFileHeader = "sluice-leader-epochs 1"

// EpochEntry says that leader epoch Epoch wrote its first record at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochHistory is a replica's durable epoch history. Its methods are safe for concurrent use.
type EpochHistory struct {
	path string
	mu   struct {
		sync.Mutex
		entries []EpochEntry
	}
}

// OpenEpochHistory loads dir's epoch history (an absent file is an empty history) and drops the
// entries that start beyond logEnd: after a crash the file may be ahead of a log that lost its tail.
func OpenEpochHistory(dir string, logEnd int64) (*EpochHistory, error) {
	h := &EpochHistory{path: filepath.Join(dir, epochFileName)}
	data, err := os.ReadFile(h.path)
	if errors.Is(err, os.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replication: read epoch history: %w", err)
	}
	entries, err := parseEpochs(data)
	if err != nil {
		return nil, fmt.Errorf("replication: %s: %w", h.path, err)
	}
	kept := entries
	for len(kept) > 0 && kept[len(kept)-1].StartOffset > logEnd {
		kept = kept[:len(kept)-1]
	}
	h.mu.entries = kept
	if len(kept) != len(entries) {
		if err := h.writeLocked(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func parseEpochs(data []byte) ([]EpochEntry, error) {
	scanner := bufio.NewScanner(bytes.NewReader(data))
	if !scanner.Scan() || scanner.Text() != epochFileHeader {
		return nil, errors.New("not an epoch history (bad format line)")
	}
	var entries []EpochEntry
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 2 {
			return nil, fmt.Errorf("bad line %q", scanner.Text())
		}
		epoch, err1 := strconv.ParseInt(fields[0], 10, 32)
		start, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("bad line %q", scanner.Text())
		}
		entry := EpochEntry{Epoch: int32(epoch), StartOffset: start}
		if n := len(entries); n > 0 && (entry.Epoch <= entries[n-1].Epoch || entry.StartOffset < entries[n-1].StartOffset) {
			return nil, fmt.Errorf("line %q out of order", scanner.Text())
		}
		entries = append(entries, entry)
	}
	return entries, scanner.Err()
}

// Entries returns a copy of the history.
func (h *EpochHistory) Entries() []EpochEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]EpochEntry(nil), h.mu.entries...)
}

// LastEpoch is the newest epoch in the history, or -1 when it is empty.
func (h *EpochHistory) LastEpoch() int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.mu.entries) == 0 {
		return -1
	}
	return h.mu.entries[len(h.mu.entries)-1].Epoch
}

// Assign records that epoch starts at startOffset, durably, if epoch is newer than the last one.
// An epoch at or below the last one changes nothing.
func (h *EpochHistory) Assign(epoch int32, startOffset int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.mu.entries); n > 0 {
		last := h.mu.entries[n-1]
		if epoch <= last.Epoch {
			return nil
		}
		if startOffset < last.StartOffset {
			return fmt.Errorf("replication: epoch %d at %d starts before epoch %d at %d", epoch, startOffset, last.Epoch, last.StartOffset)
		}
	}
	h.mu.entries = append(h.mu.entries, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return h.writeLocked()
}

// TruncateTo drops the epochs that start at or after offset: the log was cut at offset.
func (h *EpochHistory) TruncateTo(offset int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.mu.entries)
	for n > 0 && h.mu.entries[n-1].StartOffset >= offset {
		n--
	}
	if n == len(h.mu.entries) {
		return nil
	}
	h.mu.entries = h.mu.entries[:n]
	return h.writeLocked()
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka does: the largest epoch in the history at or
// below epoch, and the offset where it ends (the next epoch's start, or logEnd for the newest).
// It returns (-1, -1) when every known epoch is newer than epoch, or the history is empty.
func (h *EpochHistory) EndOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return endOffsetFor(h.mu.entries, epoch, logEnd)
}

// endOffsetFor is EndOffsetFor's policy, pure.
func endOffsetFor(entries []EpochEntry, epoch int32, logEnd int64) (int32, int64) {
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Epoch > epoch {
			continue
		}
		if i == len(entries)-1 {
			return entries[i].Epoch, logEnd
		}
		return entries[i].Epoch, entries[i+1].StartOffset
	}
	return -1, -1
}

func (h *EpochHistory) writeLocked() error {
	var buf bytes.Buffer
	buf.WriteString(epochFileHeader + "\n")
	for _, e := range h.mu.entries {
		fmt.Fprintf(&buf, "%d %d\n", e.Epoch, e.StartOffset)
	}
	tmp := h.path + ".tmp"
	if err := writeFileSync(tmp, buf.Bytes()); err != nil {
		return fmt.Errorf("replication: write epoch history: %w", err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		return fmt.Errorf("replication: write epoch history: %w", err)
	}
	dir, err := os.Open(filepath.Dir(h.path))
	if err != nil {
		return fmt.Errorf("replication: sync epoch history dir: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("replication: sync epoch history dir: %w", err)
	}
	return nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
