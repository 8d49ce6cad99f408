package index

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
)

// Error classes.
var (
	ErrFull         = errors.New("index: full")
	ErrNotMonotonic = errors.New("index: entry does not increase")
	ErrOutOfSegment = errors.New("index: entry outside the segment's range")
)

// codec describes one kind of fixed-width entry.
type codec[E any] interface {
	size() int
	encode(dst []byte, e E)
	decode(src []byte) E
	// follows reports whether next may follow prev in a valid table.
	follows(prev, next E) bool
}

// table is the shared core of both indexes: an in-memory slice of entries mirrored into a file.
type table[E any] struct {
	codec      codec[E]
	path       string
	maxEntries int
	file       *os.File
	// trimmed: openTable found bytes after the longest valid prefix and cut them off.
	trimmed bool

	mu struct {
		sync.RWMutex
		entries []E
		written int // entries[:written] are in the file
	}
}

func openTable[E any](path string, maxEntries int, c codec[E], valid func(E) bool) (*table[E], error) {
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", path, err)
	}
	t := &table[E]{codec: c, path: path, maxEntries: maxEntries, file: file}
	raw, err := os.ReadFile(path)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("index: read %s: %w", path, err)
	}
	size := c.size()
	entries := make([]E, 0, min(len(raw)/size, maxEntries))
	for pos := 0; pos+size <= len(raw) && len(entries) < maxEntries; pos += size {
		e := c.decode(raw[pos:])
		if !valid(e) || (len(entries) > 0 && !c.follows(entries[len(entries)-1], e)) {
			break
		}
		entries = append(entries, e)
	}
	t.mu.entries = entries
	t.mu.written = len(entries)
	if len(entries)*size != len(raw) {
		t.trimmed = true
		// Drop the invalid tail now so later Flushes append right after the valid prefix.
		if err := file.Truncate(int64(len(entries) * size)); err != nil {
			file.Close()
			return nil, fmt.Errorf("index: trim %s: %w", path, err)
		}
	}
	return t, nil
}

func (t *table[E]) appendEntry(e E) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.entries) >= t.maxEntries {
		return fmt.Errorf("%w: %d entries in %s", ErrFull, t.maxEntries, t.path)
	}
	if n := len(t.mu.entries); n > 0 && !t.codec.follows(t.mu.entries[n-1], e) {
		return fmt.Errorf("%w: %v after %v in %s", ErrNotMonotonic, e, t.mu.entries[n-1], t.path)
	}
	t.mu.entries = append(t.mu.entries, e)
	return nil
}

// search returns the index of the last entry for which before(entry) holds, or -1.
func (t *table[E]) search(before func(E) bool) (E, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	entries := t.mu.entries
	i := sort.Search(len(entries), func(i int) bool { return !before(entries[i]) })
	if i == 0 {
		var zero E
		return zero, false
	}
	return entries[i-1], true
}

// truncate keeps the entries for which keep holds (a prefix) and drops the rest, in memory and file.
func (t *table[E]) truncate(keep func(E) bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	entries := t.mu.entries
	n := sort.Search(len(entries), func(i int) bool { return !keep(entries[i]) })
	t.mu.entries = entries[:n]
	if t.mu.written > n {
		t.mu.written = n
		if err := t.file.Truncate(int64(n * t.codec.size())); err != nil {
			return fmt.Errorf("index: truncate %s: %w", t.path, err)
		}
	}
	return nil
}

func (t *table[E]) length() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.mu.entries)
}

func (t *table[E]) last() (E, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var zero E
	if len(t.mu.entries) == 0 {
		return zero, false
	}
	return t.mu.entries[len(t.mu.entries)-1], true
}

func (t *table[E]) unwritten() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.mu.written < len(t.mu.entries)
}

func (t *table[E]) full() bool { return t.length() >= t.maxEntries }

// flush writes the entries not yet in the file with one write; it does not fsync.
func (t *table[E]) flush() error {
	t.mu.RLock()
	pending := t.mu.entries[t.mu.written:]
	from := t.mu.written
	t.mu.RUnlock()
	if len(pending) == 0 {
		return nil
	}
	size := t.codec.size()
	buf := make([]byte, len(pending)*size)
	for i, e := range pending {
		t.codec.encode(buf[i*size:], e)
	}
	if _, err := t.file.WriteAt(buf, int64(from*size)); err != nil {
		return fmt.Errorf("index: write %s: %w", t.path, err)
	}
	t.mu.Lock()
	// A truncate between the read and here may have lowered the count; never claim more than exists.
	t.mu.written = min(from+len(pending), len(t.mu.entries))
	t.mu.Unlock()
	return nil
}

// seal writes every entry, trims the file to exactly the entries and fsyncs it.
func (t *table[E]) seal() error {
	if err := t.flush(); err != nil {
		return err
	}
	n := t.length()
	if err := t.file.Truncate(int64(n * t.codec.size())); err != nil {
		return fmt.Errorf("index: trim %s: %w", t.path, err)
	}
	if err := t.file.Sync(); err != nil {
		return fmt.Errorf("index: sync %s: %w", t.path, err)
	}
	return nil
}

func (t *table[E]) close() error {
	if err := t.file.Close(); err != nil {
		return fmt.Errorf("index: close %s: %w", t.path, err)
	}
	return nil
}

func (t *table[E]) remove() error {
	t.file.Close()
	if err := os.Remove(t.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("index: remove %s: %w", t.path, err)
	}
	return nil
}
