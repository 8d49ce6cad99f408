package segment

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
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

// TestScanHeaders walks batches across segments, handing over whole control batches only.
func TestScanHeaders(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig())
	defer l.Close()
	gen := newBatchGen(2)
	var want []int64
	control := func() []byte {
		var b batch.Builder
		b.Reset(time.UnixMilli(1))
		b.Add(batch.Record{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}})
		b.ProducerID, b.ProducerEpoch = 7, 0
		raw := bytes.Clone(b.Finish())
		binary.BigEndian.PutUint16(raw[21:], batch.AttributeTransactional|batch.AttributeControl)
		batch.SetCRC(raw)
		return raw
	}
	for i := range 300 {
		raw := gen.random()
		if i%50 == 49 {
			raw = control()
		}
		want = append(want, l.LogEndOffset())
		appendBatches(t, l, raw, 0)
	}
	if l.SegmentCount() < 2 {
		t.Fatalf("want several segments, have %d", l.SegmentCount())
	}
	from := want[10]
	var got []int64
	controls := 0
	err := l.ScanHeaders(from, l.LogEndOffset(), func(h batch.Header, raw []byte) error {
		got = append(got, h.BaseOffset)
		if h.IsControl() != (raw != nil) {
			t.Fatalf("batch at %d: control %v, whole batch given %v", h.BaseOffset, h.IsControl(), raw != nil)
		}
		if raw != nil {
			controls++
			if _, err := batch.Validate(raw); err != nil {
				t.Fatalf("control batch at %d: %v", h.BaseOffset, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want[10:]) || controls != 6 {
		for i := range min(len(got), len(want)-10) {
			if got[i] != want[10+i] {
				t.Logf("first difference at %d: got %d, want %d", i, got[i], want[10+i])
				break
			}
		}
		t.Fatalf("scanned %d batches (%d control) from %d, want %d (6)", len(got), controls, from, len(want)-10)
	}
}
