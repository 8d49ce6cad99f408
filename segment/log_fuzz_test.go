package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

// fuzzBase is a crashed log of two segments whose active one was never flushed, so recovery scans
// all of it; files holds its bytes by name.
type fuzzBase struct {
	cfg        Config
	files      map[string][]byte
	activeName string
	activeBase int64
	activeEnd  int64 // bytes of batches in the active file
	batches    []storedBatch
	next       []byte // a valid batch, offsets not yet assigned
}

func newFuzzBase(f testing.TB, flushAll bool) *fuzzBase {
	b := &fuzzBase{cfg: crashConfig(), files: map[string][]byte{}}
	b.cfg.IndexIntervalBytes = 200
	dir := f.TempDir()
	l := openLog(f, dir, b.cfg)
	gen := newBatchGen(4)
	for i := 0; i < 12; i++ {
		if i == 5 {
			if err := l.Roll(); err != nil {
				f.Fatal(err)
			}
		}
		stored, _ := appendBatches(f, l, gen.next(3, 40+gen.rng.IntN(300)), 2)
		b.batches = append(b.batches, stored...)
	}
	if flushAll {
		if err := l.Sync(context.Background()); err != nil {
			f.Fatal(err)
		}
	}
	active := l.activeSegment()
	b.activeName, b.activeBase, b.activeEnd = filepath.Base(active.dataPath), active.baseOffset, active.size()
	l.abandon()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		b.files[e.Name()] = raw
	}
	b.next = gen.next(2, 60)
	return b
}

// materialize writes the base log into a new directory, with the active data file replaced.
func (b *fuzzBase) materialize(t *testing.T, replace map[string][]byte) string {
	dir := t.TempDir()
	for name, raw := range b.files {
		if r, ok := replace[name]; ok {
			raw = r
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// validPrefix is the simple version of recovery: whole valid batches with dense offsets from the
// start of the file, stopping at the first thing that is not one.
func validPrefix(data []byte, base int64) (size int, next int64) {
	next = base
	for size < len(data) {
		h, err := batch.Validate(data[size:])
		if err != nil || h.BaseOffset != next {
			break
		}
		size += h.Size()
		next = h.NextOffset()
	}
	return size, next
}

// FuzzRecoverActiveTail puts fuzzed bytes after the last batch of the active data file, over its tail
// (cutting the file there), or over its bytes in place, and reopens. Recovery must not panic or fail,
// must keep every batch before the damage, and must claim exactly the valid batches a plain scan
// finds (the fuzzer may append whole valid batches with the right offsets: they count).
func FuzzRecoverActiveTail(f *testing.F) {
	b := newFuzzBase(f, false)
	following := bytes.Clone(b.next)
	batch.SetBaseOffset(following, b.batches[len(b.batches)-1].last+1)
	wrongOffset := bytes.Clone(b.next)
	batch.SetBaseOffset(wrongOffset, 12345)
	huge := bytes.Clone(b.next[:batch.HeaderSize])
	binary.BigEndian.PutUint32(huge[8:], 1<<30)
	f.Add(uint8(0), uint16(0), following)
	f.Add(uint8(0), uint16(0), append(bytes.Clone(following), following[:30]...))
	f.Add(uint8(0), uint16(0), wrongOffset)
	f.Add(uint8(0), uint16(0), huge)
	f.Add(uint8(1), uint16(100), []byte{})
	f.Add(uint8(1), uint16(b.activeEnd-5), []byte("garbage"))
	f.Add(uint8(2), uint16(300), make([]byte, 40))
	f.Add(uint8(2), uint16(0), []byte{0xff})
	f.Fuzz(func(t *testing.T, mode uint8, at uint16, data []byte) {
		original := b.files[b.activeName]
		position := int64(at) % (b.activeEnd + 1)
		var active []byte
		switch mode % 3 {
		case 0: // after the last batch, over the preallocated zeroes
			active = bytes.Clone(original)
			position = b.activeEnd
			if need := int(position) + len(data); need > len(active) {
				active = append(active, make([]byte, need-len(active))...)
			}
			copy(active[position:], data)
		case 1: // replace the tail
			active = append(bytes.Clone(original[:position]), data...)
		case 2: // overwrite in place
			active = bytes.Clone(original)
			if need := int(position) + len(data); need > len(active) {
				active = append(active, make([]byte, need-len(active))...)
			}
			copy(active[position:], data)
		}
		dir := b.materialize(t, map[string][]byte{b.activeName: active})
		wantSize, wantNext := validPrefix(active, b.activeBase)
		damageAt := 0 // the first byte that differs from the crashed file
		for damageAt < len(active) && damageAt < len(original) && active[damageAt] == original[damageAt] {
			damageAt++
		}
		untouched, _ := validPrefix(original[:min(int64(damageAt), b.activeEnd)], b.activeBase)
		l, err := Open(dir, b.cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		s := l.activeSegment()
		if s.size() < int64(untouched) {
			t.Fatalf("recovered %d bytes; the batches before the damage at %d are %d bytes", s.size(), damageAt, untouched)
		}
		if s.size() != int64(wantSize) || l.LogEndOffset() != wantNext {
			t.Fatalf("recovered %d bytes up to offset %d; the valid batches are %d bytes up to %d", s.size(), l.LogEndOffset(), wantSize, wantNext)
		}
		// Everything claimed reads back as it is in the file.
		got, err := l.Read(s.baseOffset, 1<<20, 1<<62, nil)
		if err != nil || !bytes.Equal(got, active[:wantSize]) {
			t.Fatalf("read of the active segment: %d bytes, %v; want %d", len(got), err, wantSize)
		}
		res, err := l.Append(bytes.Clone(b.next), 9)
		if err != nil || res.BaseOffset != wantNext {
			t.Fatalf("append after recovery: %+v, %v; want offset %d", res, err, wantNext)
		}
		l.abandon()
		l, err = Open(dir, b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != res.LastOffset+1 {
			t.Fatalf("second recovery ends at %d, want %d", l.LogEndOffset(), res.LastOffset+1)
		}
		l.abandon()
	})
}

// FuzzRecoverIndexes replaces the offset and time index files of a fully flushed log's active
// segment with fuzzed bytes. The data is intact, so recovery must keep all of it, and reads and
// lookups by time must come out right whatever the indexes claimed.
func FuzzRecoverIndexes(f *testing.F) {
	b := newFuzzBase(f, true)
	stem := b.activeName[:len(b.activeName)-len(dataSuffix)]
	f.Add(b.files[stem+offsetSuffix], b.files[stem+timeSuffix])
	f.Add([]byte{}, []byte{})
	f.Add(make([]byte, 64), make([]byte, 48))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 90}, []byte{0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, offsets, times []byte) {
		dir := b.materialize(t, map[string][]byte{stem + offsetSuffix: offsets, stem + timeSuffix: times})
		l, err := Open(dir, b.cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.abandon()
		checkIndexLookups(t, l, b.batches)
		// Truncate inside the active segment, where the fuzzed entries are.
		end := b.batches[len(b.batches)-1].last + 1
		target := b.activeBase + 1 + int64(len(offsets)+len(times))%(end-b.activeBase-1)
		if err := l.Truncate(target); err != nil {
			t.Fatal(err)
		}
		m := &logModel{batches: b.batches, end: end}
		m.truncate(target)
		checkBatches(t, l, m.batches)
	})
}

// checkIndexLookups reads every offset with small and large budgets and finds every batch by its
// timestamp: what the offset and time indexes serve.
func checkIndexLookups(t *testing.T, l *Log, batches []storedBatch) {
	t.Helper()
	checkBatches(t, l, batches)
	m := &logModel{batches: batches, start: l.LogStartOffset(), end: batches[len(batches)-1].last + 1}
	for i, probe := range batches {
		checkRead(t, l, m, probe.base, int64(i*150), 1<<62)
		for offset := probe.base; offset <= probe.last; offset++ {
			checkRead(t, l, m, offset, 1<<20, m.end-int64(i%3))
		}
	}
	for _, probe := range batches {
		offset, _, found, err := l.OffsetForTimestamp(probe.maxTimestamp)
		wantOffset, _, _ := expectedTimestampLookup(batches, probe.maxTimestamp)
		if err != nil || !found || offset != wantOffset {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %v, %v; want %d", probe.maxTimestamp, offset, found, err, wantOffset)
		}
	}
}

// TestReadsSurviveDamagedIndexEntry damages one offset index entry below the newest (which recovery
// verifies) at a time, moving its offset or position a little: reads must neither fail nor return
// the wrong batch.
func TestReadsSurviveDamagedIndexEntry(t *testing.T) {
	b := newFuzzBase(t, true)
	stem := b.activeName[:len(b.activeName)-len(dataSuffix)]
	clean := b.files[stem+offsetSuffix]
	if len(clean) < 3*index.OffsetEntrySize {
		t.Fatalf("index of %d bytes: want several entries", len(clean))
	}
	for entry := 0; entry < len(clean)/index.OffsetEntrySize-1; entry++ {
		for _, field := range []int{0, 4} {
			for _, delta := range []int32{-61, -1, 1, 2, 61, 1000} {
				damaged := bytes.Clone(clean)
				at := entry*index.OffsetEntrySize + field
				binary.BigEndian.PutUint32(damaged[at:], uint32(int32(binary.BigEndian.Uint32(damaged[at:]))+delta))
				t.Run(fmt.Sprintf("entry%d/field%d/%+d", entry, field, delta), func(t *testing.T) {
					checkDamagedIndex(t, b, damaged)
				})
			}
		}
	}
	// A garbage first entry at position 0 beside valid ones (found by FuzzRecoverIndexes).
	garbageFirst := append([]byte{0, 0, 0, 7, 0, 0, 0, 0}, clean[index.OffsetEntrySize:]...)
	t.Run("garbage-first-entry", func(t *testing.T) { checkDamagedIndex(t, b, garbageFirst) })
}

// checkDamagedIndex opens the flushed base log with the given active offset index, checks every
// lookup, then truncates to offsets across the active segment (from fresh copies): Truncate must
// also not take a damaged entry's word for where batches are.
func checkDamagedIndex(t *testing.T, b *fuzzBase, offsets []byte) {
	t.Helper()
	stem := b.activeName[:len(b.activeName)-len(dataSuffix)]
	open := func() *Log {
		l, err := Open(b.materialize(t, map[string][]byte{stem + offsetSuffix: offsets}), b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	checkIndexLookups(t, l, b.batches)
	l.abandon()
	end := b.batches[len(b.batches)-1].last + 1
	for target := b.activeBase + 1; target < end; target += 3 {
		l := open()
		if err := l.Truncate(target); err != nil {
			t.Fatal(err)
		}
		m := &logModel{batches: b.batches, end: end}
		m.truncate(target)
		checkBatches(t, l, m.batches)
		l.abandon()
	}
}
