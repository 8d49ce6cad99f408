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
