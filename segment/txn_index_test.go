package segment

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTxnIndex appends aborted transactions across a roll, queries overlaps, reopens with a torn
// entry, and truncates for a rescan.
func TestTxnIndex(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	gen := newBatchGen(1)
	for range 10 {
		appendBatches(t, l, gen.next(1, 10), 0) // offsets 0..9
	}
	x, err := l.OpenTxnIndex()
	if err != nil {
		t.Fatal(err)
	}
	first := AbortedTxn{ProducerID: 1, FirstOffset: 2, LastOffset: 5, LastStableOffset: 2}
	second := AbortedTxn{ProducerID: 2, FirstOffset: 3, LastOffset: 8, LastStableOffset: 6}
	for _, e := range []AbortedTxn{first, second} {
		if err := x.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Append(first); err == nil {
		t.Fatal("an entry out of marker order was accepted")
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		appendBatches(t, l, gen.next(1, 10), 0) // offsets 10..14, in segment 10
	}
	third := AbortedTxn{ProducerID: 3, FirstOffset: 9, LastOffset: 12, LastStableOffset: 9}
	if err := x.Append(third); err != nil {
		t.Fatal(err)
	}
	check := func(x *TxnIndex, from, upTo int64, want ...AbortedTxn) {
		t.Helper()
		if got := x.Aborted(from, upTo); !slices.Equal(got, want) {
			t.Fatalf("Aborted(%d, %d) = %+v, want %+v", from, upTo, got, want)
		}
	}
	check(x, 0, 3, first)
	check(x, 0, 100, first, second, third)
	check(x, 6, 100, second, third)
	check(x, 9, 10, third)
	check(x, 13, 100)
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000010.txnindex")); err != nil {
		t.Fatalf("entry not in its segment's file: %v", err)
	}
	// A torn trailing entry is cut on open.
	seg0 := filepath.Join(dir, "00000000000000000000.txnindex")
	f, err := os.OpenFile(seg0, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 1, 2})
	f.Close()
	reopened, err := l.OpenTxnIndex()
	if err != nil {
		t.Fatal(err)
	}
	check(reopened, 0, 100, first, second, third)
	if err := reopened.TruncateFrom(8); err != nil {
		t.Fatal(err)
	}
	check(reopened, 0, 100, first)
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000010.txnindex")); !os.IsNotExist(err) {
		t.Fatalf("file of truncated entries kept: %v", err)
	}
	again, err := l.OpenTxnIndex()
	if err != nil {
		t.Fatal(err)
	}
	check(again, 0, 100, first)
}
