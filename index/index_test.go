package index

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func openOffsets(t *testing.T, path string, base int64, max int) *OffsetIndex {
	t.Helper()
	x, err := OpenOffsetIndex(path, base, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// linearLookup is the simple version the binary search is checked against.
func linearLookup(entries []OffsetEntry, base, offset int64) OffsetEntry {
	found := OffsetEntry{Offset: base}
	for _, e := range entries {
		if e.Offset <= offset {
			found = e
		}
	}
	return found
}

func TestOffsetLookupMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const base = 1000
	x := openOffsets(t, filepath.Join(t.TempDir(), "a.index"), base, 10000)
	var model []OffsetEntry
	offset, position := int64(base), int64(0)
	for i := 0; i < 2000; i++ {
		offset += 1 + rng.Int64N(50)
		position += 1 + rng.Int64N(9000)
		if err := x.Append(offset, position); err != nil {
			t.Fatal(err)
		}
		model = append(model, OffsetEntry{offset, position})
	}
	for i := 0; i < 20000; i++ {
		q := base - 5 + rng.Int64N(offset-base+100)
		if got, want := x.Lookup(q), linearLookup(model, base, q); got != want {
			t.Fatalf("Lookup(%d) = %+v, want %+v", q, got, want)
		}
	}
	if err := x.Append(offset, position+1); !errors.Is(err, ErrNotMonotonic) {
		t.Fatalf("repeated offset: %v", err)
	}
}

func TestOffsetIndexReopenAndDamage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "00000000000000000100.index")
	x, err := OpenOffsetIndex(path, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 10; i++ {
		if err := x.Append(100+i*10, i*4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Seal(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	reopen := func() *OffsetIndex { return openOffsets(t, path, 100, 100) }
	if y := reopen(); y.Len() != 10 || y.Lookup(155).Offset != 150 {
		t.Fatalf("reopen: %d entries, %+v", y.Len(), y.Lookup(155))
	}
	// A cut in the middle of an entry keeps the whole entries before it.
	if err := os.Truncate(path, 8*6+3); err != nil {
		t.Fatal(err)
	}
	if y := reopen(); y.Len() != 6 {
		t.Fatalf("cut: %d entries", y.Len())
	}
	// Zeroed or garbage tails are not entries.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 64))
	f.Close()
	if y := reopen(); y.Len() != 6 {
		t.Fatalf("zero tail: %d entries", y.Len())
	}
	f, _ = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1}) // goes backwards
	f.Close()
	if y := reopen(); y.Len() != 6 {
		t.Fatalf("backwards tail: %d entries", y.Len())
	}
}

func TestOffsetIndexFullTruncateFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.index")
	x := openOffsets(t, path, 0, 3)
	for i := int64(1); i <= 3; i++ {
		if err := x.Append(i, i*100); err != nil {
			t.Fatal(err)
		}
	}
	if !x.Full() || !errors.Is(x.Append(4, 400), ErrFull) {
		t.Fatal("expected full")
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.TruncateFromPosition(200); err != nil {
		t.Fatal(err)
	}
	if x.Len() != 1 {
		t.Fatalf("after truncate: %d", x.Len())
	}
	if st, _ := os.Stat(path); st.Size() != 8 {
		t.Fatalf("file after truncate: %d bytes", st.Size())
	}
	if got := x.LookupPosition(250); got.Position != 100 {
		t.Fatalf("LookupPosition: %+v", got)
	}
	if !errors.Is(x.Append(1<<33, 500), ErrOutOfSegment) {
		t.Fatal("offset beyond 32 bits accepted")
	}
}

func TestTimeIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.timeindex")
	x, err := OpenTimeIndex(path, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, e := range []TimeEntry{{1000, 50}, {900, 60}, {2000, 70}, {2000, 80}, {3000, 90}} {
		if _, err := x.MaybeAppend(e.Timestamp, e.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if x.Len() != 3 {
		t.Fatalf("%d entries, want 3 (non-increasing stamps skipped)", x.Len())
	}
	for ts, want := range map[int64]int64{500: 50, 1000: 50, 1001: 50, 2000: 50, 2500: 70, 9999: 90} {
		if got := x.Lookup(ts); got != want {
			t.Errorf("Lookup(%d) = %d, want %d", ts, got, want)
		}
	}
	if err := x.Seal(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	y, err := OpenTimeIndex(path, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if y.Len() != 3 {
		t.Fatalf("reopened %d", y.Len())
	}
	if err := y.TruncateFromOffset(70); err != nil || y.Len() != 1 {
		t.Fatalf("truncate: %v %d", err, y.Len())
	}
}

// linearTimeLookup is the simple version TimeIndex.Lookup is checked against.
func linearTimeLookup(entries []TimeEntry, base, timestamp int64) int64 {
	found := base
	for _, e := range entries {
		if e.Timestamp < timestamp {
			found = e.Offset
		}
	}
	return found
}

func TestTimeLookupMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const base = 500
	path := filepath.Join(t.TempDir(), "a.timeindex")
	x, err := OpenTimeIndex(path, base, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var model []TimeEntry
	offset, stamp := int64(base), int64(1_700_000_000_000)
	for i := 0; i < 3000; i++ {
		offset += rng.Int64N(20)
		stamp += rng.Int64N(100) - 30 // not monotonic: MaybeAppend keeps only increases
		added, err := x.MaybeAppend(stamp, offset)
		if err != nil {
			t.Fatal(err)
		}
		last := TimeEntry{Timestamp: 0, Offset: base - 1}
		if len(model) > 0 {
			last = model[len(model)-1]
		}
		if want := stamp > last.Timestamp && offset > last.Offset; added != want {
			t.Fatalf("MaybeAppend(%d, %d) after %+v added %v", stamp, offset, last, added)
		}
		if added {
			model = append(model, TimeEntry{stamp, offset})
		}
	}
	check := func(x *TimeIndex, model []TimeEntry) {
		t.Helper()
		lo, hi := model[0].Timestamp-10, model[len(model)-1].Timestamp+10
		for i := 0; i < 5000; i++ {
			q := lo + rng.Int64N(hi-lo)
			if got, want := x.Lookup(q), linearTimeLookup(model, base, q); got != want {
				t.Fatalf("Lookup(%d) = %d, want %d", q, got, want)
			}
		}
	}
	check(x, model)
	// Truncation keeps the entries below the offset, in memory and in the file.
	cut := model[len(model)/2].Offset
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.TruncateFromOffset(cut); err != nil {
		t.Fatal(err)
	}
	model = model[:len(model)/2]
	check(x, model)
	if err := x.Seal(); err != nil {
		t.Fatal(err)
	}
	y, err := OpenTimeIndex(path, base, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if y.Len() != len(model) || y.Trimmed() {
		t.Fatalf("reopened %d entries (trimmed %v), want %d", y.Len(), y.Trimmed(), len(model))
	}
	check(y, model)
}

func TestOpenTrimsInvalidTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.timeindex")
	x, err := OpenTimeIndex(path, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	x.MaybeAppend(100, 1)
	x.MaybeAppend(200, 2)
	x.Seal()
	x.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{1, 2, 3})
	f.Close()
	y, err := OpenTimeIndex(path, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if y.Len() != 2 || !y.Trimmed() {
		t.Fatalf("%d entries, trimmed %v", y.Len(), y.Trimmed())
	}
	if st, _ := os.Stat(path); st.Size() != 2*TimeEntrySize {
		t.Fatalf("file of %d bytes after trimming", st.Size())
	}
}

// FuzzOpenIndexes loads arbitrary bytes as both kinds of index: never a panic, never more entries
// than whole entries in the file or than maxEntries, entries strictly increasing, the file trimmed to
// them, and lookups agreeing with a linear scan.
func FuzzOpenIndexes(f *testing.F) {
	f.Add([]byte{}, uint8(4))
	f.Add(make([]byte, 40), uint8(4))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0, 0, 20, 0, 0, 0, 2, 0, 0, 0, 30}, uint8(8))
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 5, 9}, uint8(2))
	f.Fuzz(func(t *testing.T, raw []byte, maxEntries uint8) {
		limit := int(maxEntries%16) + 1
		dir := t.TempDir()
		offsetPath, timePath := filepath.Join(dir, "f.index"), filepath.Join(dir, "f.timeindex")
		os.WriteFile(offsetPath, raw, 0o644)
		os.WriteFile(timePath, raw, 0o644)
		const base = 1000
		x, err := OpenOffsetIndex(offsetPath, base, limit)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		entries := x.Entries()
		if len(entries) > len(raw)/OffsetEntrySize || len(entries) > limit {
			t.Fatalf("%d offset entries from %d bytes (max %d)", len(entries), len(raw), limit)
		}
		for i := 1; i < len(entries); i++ {
			if entries[i].Offset <= entries[i-1].Offset || entries[i].Position <= entries[i-1].Position {
				t.Fatalf("entries not increasing: %v", entries)
			}
		}
		if st, _ := os.Stat(offsetPath); st.Size() != int64(len(entries)*OffsetEntrySize) {
			t.Fatalf("offset index file %d bytes for %d entries", st.Size(), len(entries))
		}
		for _, q := range []int64{base - 1, base, base + 1, base + 1<<31, base + 1<<32} {
			if got, want := x.Lookup(q), linearLookup(entries, base, q); got != want {
				t.Fatalf("Lookup(%d) = %+v, want %+v", q, got, want)
			}
		}
		y, err := OpenTimeIndex(timePath, base, limit)
		if err != nil {
			t.Fatal(err)
		}
		defer y.Close()
		times := y.Entries()
		if len(times) > len(raw)/TimeEntrySize || len(times) > limit {
			t.Fatalf("%d time entries from %d bytes (max %d)", len(times), len(raw), limit)
		}
		for i, e := range times {
			if e.Timestamp <= 0 || i > 0 && (e.Timestamp <= times[i-1].Timestamp || e.Offset <= times[i-1].Offset) {
				t.Fatalf("time entries not increasing or not positive: %v", times)
			}
		}
		if y.Trimmed() != (len(times)*TimeEntrySize != len(raw)) {
			t.Fatalf("Trimmed() = %v with %d entries from %d bytes", y.Trimmed(), len(times), len(raw))
		}
		for _, q := range []int64{-1, 0, 1, 1 << 40, 1 << 62} {
			if got, want := y.Lookup(q), linearTimeLookup(times, base, q); got != want {
				t.Fatalf("time Lookup(%d) = %d, want %d", q, got, want)
			}
		}
	})
}
