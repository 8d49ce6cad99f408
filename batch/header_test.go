package batch

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func build(t testing.TB, values ...string) []byte {
	t.Helper()
	var b Builder
	b.Reset(time.UnixMilli(1_700_000_000_000))
	for i, v := range values {
		b.Add(Record{Key: []byte{byte(i)}, Value: []byte(v), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
	}
	return append([]byte(nil), b.Finish()...)
}

func TestBuilderMatchesKafkaEncoding(t *testing.T) {
	raw := build(t, "alpha", "beta", "gamma")
	h, err := Validate(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h.RecordCount != 3 || h.LastOffsetDelta != 2 || h.Size() != len(raw) || h.MaxTimestamp != 1_700_000_000_002 {
		t.Fatalf("header %+v", h)
	}
	// An independent decoder (kmsg) reads the same records.
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if int32(kb.CRC) != int32(h.CRC) || kb.NumRecords != 3 {
		t.Fatalf("kmsg batch %+v", kb)
	}
	records := kb.Records
	for i, want := range []string{"alpha", "beta", "gamma"} {
		var r kmsg.Record
		if err := r.ReadFrom(records); err != nil {
			t.Fatal(err)
		}
		if string(r.Value) != want || r.OffsetDelta != int32(i) || r.TimestampDelta64 != int64(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
		records = records[r.Length+int32(varintSize(int64(r.Length))):]
	}
}

func TestValidateRejects(t *testing.T) {
	good := build(t, "x", "y")
	check := func(name string, mutate func(b []byte) []byte, want error) {
		t.Helper()
		b := mutate(append([]byte(nil), good...))
		if _, err := Validate(b); !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	check("truncated header", func(b []byte) []byte { return b[:40] }, ErrTruncated)
	check("truncated records", func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated)
	check("bad crc", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }, ErrCorrupt)
	check("magic 1", func(b []byte) []byte { b[offsetMagic] = 1; return b }, ErrUnsupportedMagic)
	check("magic 0 short", func(b []byte) []byte { b[offsetMagic] = 0; return b[:30] }, ErrUnsupportedMagic)
	check("magic 7", func(b []byte) []byte { b[offsetMagic] = 7; return b }, ErrCorrupt)
	check("zeroes", func(b []byte) []byte { return make([]byte, len(b)) }, ErrCorrupt)
	check("short length", func(b []byte) []byte { b[offsetBatchLength+3] = 3; b[offsetBatchLength+2] = 0; return b }, ErrCorrupt)
	check("count mismatch", func(b []byte) []byte { b[offsetRecordCount+3] = 5; SetCRC(b); return b }, ErrInvalidRecord)
}

func TestOffsetRewriteKeepsCRC(t *testing.T) {
	raw := build(t, "a")
	SetBaseOffset(raw, 12345)
	SetLeaderEpoch(raw, 7)
	h, err := Validate(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 12345 || h.PartitionLeaderEpoch != 7 || BaseOffsetAt(raw) != 12345 || SizeAt(raw) != int64(len(raw)) {
		t.Fatalf("%+v", h)
	}
}

func TestScanStopsAtFirstBadByte(t *testing.T) {
	a, b := build(t, "one"), build(t, "two", "three")
	log := append(append(append([]byte(nil), a...), b...), make([]byte, 100)...)
	var seen int
	valid, err := Scan(log, func(h Header, raw []byte) error { seen++; return nil })
	if valid != len(a)+len(b) || seen != 2 || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("valid %d seen %d err %v", valid, seen, err)
	}
	valid, err = Scan(log[:len(a)+len(b)], nil)
	if valid != len(a)+len(b) || err != nil {
		t.Fatalf("exact: %d %v", valid, err)
	}
	valid, err = Scan(log[:len(a)+10], nil)
	if valid != len(a) || !errors.Is(err, ErrTruncated) {
		t.Fatalf("torn: %d %v", valid, err)
	}
}

func FuzzValidate(f *testing.F) {
	f.Add(build(f, "seed"))
	f.Add(make([]byte, 61))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Validate(b)
		if err == nil && (h.Size() > len(b) || h.Size() < HeaderSize) {
			t.Fatalf("valid batch claims %d bytes of %d", h.Size(), len(b))
		}
		valid, _ := Scan(b, nil)
		if valid < 0 || valid > len(b) {
			t.Fatalf("scan claims %d bytes of %d", valid, len(b))
		}
	})
}
