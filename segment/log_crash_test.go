package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func crashConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 32 << 10
	cfg.IndexIntervalBytes = 600
	cfg.CheckpointInterval = 0 // every group commit writes the recovery point
	return cfg
}

// crashedLog is a log built once and then abandoned, to be copied and damaged by each case.
type crashedLog struct {
	dir     string
	cfg     Config
	batches []storedBatch
	// active is the data file of the active segment; activeStart its first batch in batches, and
	// positions[i] the position of batches[activeStart+i] in it.
	activePath  string
	activeStart int
	positions   []int64
	flushed     int64 // FlushedOffset when it crashed
}

// buildCrashedLog appends perSegment batches of varied sizes to each of segments segments (rolling
// between them), the active one ending with the given last batches; makes the first flushedUpTo
// batches durable with WaitFlushed (none when 0), and abandons the log.
func buildCrashedLog(t *testing.T, seed uint64, segments, perSegment, flushedUpTo int, last ...[]byte) *crashedLog {
	t.Helper()
	c := &crashedLog{dir: t.TempDir(), cfg: crashConfig()}
	gen := newBatchGen(seed)
	l := openLog(t, c.dir, c.cfg)
	count := segments * perSegment
	for i := 0; i < count; i++ {
		if i > 0 && i%perSegment == 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		raw := gen.next(4, 50+gen.rng.IntN(1500))
		if i >= count-len(last) {
			raw = last[i-(count-len(last))]
		}
		stored, _ := appendBatches(t, l, raw, 3)
		c.batches = append(c.batches, stored...)
		if i+1 == flushedUpTo {
			if err := l.WaitFlushed(context.Background(), l.LogEndOffset()-1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.SegmentCount() != segments {
		t.Fatalf("want %d segments, have %d", segments, l.SegmentCount())
	}
	active := l.activeSegment()
	c.activePath = active.dataPath
	c.activeStart = len(c.batches)
	position := int64(0)
	for i, b := range c.batches {
		if b.base >= active.baseOffset {
			if c.activeStart == len(c.batches) {
				c.activeStart = i
			}
			c.positions = append(c.positions, position)
			position += b.size()
		}
	}
	l.abandon()
	c.flushed = l.FlushedOffset()
	return c
}

// survivors returns the batches whole in the active file when its bytes from cut on are lost.
func (c *crashedLog) survivors(cut int64) []storedBatch {
	n := c.activeStart
	for i, p := range c.positions {
		if p+c.batches[c.activeStart+i].size() <= cut {
			n = c.activeStart + i + 1
		}
	}
	return c.batches[:n]
}

func (c *crashedLog) activeEnd() int64 {
	last := c.batches[len(c.batches)-1]
	return c.positions[len(c.positions)-1] + last.size()
}

// reopenAndCheck opens dir, expects exactly want, appends one batch that must get the next offset,
// crashes again and expects a second recovery to agree.
func reopenAndCheck(t *testing.T, dir string, cfg Config, want []storedBatch, extra []byte) {
	t.Helper()
	l := openLog(t, dir, cfg)
	checkBatches(t, l, want)
	stored, _ := appendBatches(t, l, bytes.Clone(extra), 4)
	want = append(want[:len(want):len(want)], stored...)
	l.abandon()
	l = openLog(t, dir, cfg)
	checkBatches(t, l, want)
	l.abandon()
}

// workspace is a copy of a crashed log that each case damages and reopens, restored in place before
// the next: creating files is slow on some filesystems, and Open changes no byte of sealed segments.
type workspace struct {
	dir   string
	saved map[string][]byte // every regular file of the crashed log
}

func newWorkspace(t *testing.T, c *crashedLog) *workspace {
	w := &workspace{dir: copyDir(t, c.dir), saved: map[string][]byte{}}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if w.saved[e.Name()], err = os.ReadFile(filepath.Join(w.dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// restore puts back the crashed log: files that changed get their bytes back, new files go.
func (w *workspace) restore(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		path := filepath.Join(w.dir, e.Name())
		want, ok := w.saved[e.Name()]
		if !ok {
			os.Remove(path)
			continue
		}
		if got, err := os.ReadFile(path); err == nil && bytes.Equal(got, want) {
			continue
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(want, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(int64(len(want))); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for name, raw := range w.saved {
		if _, err := os.Stat(filepath.Join(w.dir, name)); os.IsNotExist(err) {
			os.WriteFile(filepath.Join(w.dir, name), raw, 0o644)
		}
	}
}

// TestCrashCutsActiveFile cuts the active data file at every byte of its last two batches and at
// points in the preallocated zeroes after them, and overwrites the same tails with garbage and with
// zeroes: recovery keeps exactly the whole batches before the damage.
func TestCrashCutsActiveFile(t *testing.T) {
	gen := newBatchGen(99)
	lastTwo := [][]byte{gen.next(2, 90), gen.next(3, 160)} // two batches of a couple of hundred bytes
	extra := gen.next(2, 100)
	for _, variant := range []struct {
		name        string
		flushedUpTo int // batches made durable before the crash (0: none since the last roll)
		dropPoint   bool
	}{
		{name: "unflushed"},
		{name: "flushed-before-last-two", flushedUpTo: 28},
		{name: "no-recovery-point", flushedUpTo: 28, dropPoint: true},
	} {
		t.Run(variant.name, func(t *testing.T) {
			c := buildCrashedLog(t, 7, 3, 10, variant.flushedUpTo, lastTwo...)
			if variant.dropPoint {
				os.Remove(filepath.Join(c.dir, recoveryPointFile))
			}
			end := c.activeEnd()
			from := c.positions[len(c.positions)-2]
			info, err := os.Stat(c.activePath)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size() != c.cfg.SegmentBytes {
				t.Fatalf("active file %d bytes, want preallocated %d", info.Size(), c.cfg.SegmentBytes)
			}
			original, err := os.ReadFile(c.activePath)
			if err != nil {
				t.Fatal(err)
			}
			w := newWorkspace(t, c)
			damage := func(name string, position int64, apply func(path string)) {
				w.restore(t)
				apply(filepath.Join(w.dir, filepath.Base(c.activePath)))
				want := c.survivors(position)
				if flushedEnd := want[len(want)-1].last + 1; flushedEnd < c.flushed {
					t.Fatalf("%s at %d: the case would lose flushed data", name, position)
				}
				t.Run(fmt.Sprintf("%s@%d", name, position), func(t *testing.T) { reopenAndCheck(t, w.dir, c.cfg, want, extra) })
			}
			cut := func(position int64) {
				damage("cut", position, func(path string) {
					if err := os.Truncate(path, position); err != nil {
						t.Fatal(err)
					}
				})
			}
			overwrite := func(name string, position int64, fill func([]byte)) {
				junk := make([]byte, end+100-position)
				fill(junk)
				// Damage starts at the first byte that changes (a batch often ends in a zero byte).
				for len(junk) > 0 && junk[0] == original[position] {
					junk, position = junk[1:], position+1
				}
				damage(name, position, func(path string) {
					f, err := os.OpenFile(path, os.O_WRONLY, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					if _, err := f.WriteAt(junk, position); err != nil {
						t.Fatal(err)
					}
				})
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for position := from; position <= end; position++ {
				if variant.name == "no-recovery-point" && (position-from)%7 != 0 {
					continue // the same scan as unflushed; a sample will do
				}
				cut(position)
				if variant.name == "unflushed" {
					overwrite("garbage", position, func(b []byte) {
						for i := range b {
							b[i] = byte(rng.Uint32())
						}
					})
					overwrite("zeroes", position, func(b []byte) { clear(b) })
				}
			}
			for _, position := range []int64{end + 1, end + 60, end + 61, end + 4096, info.Size() - 1} {
				cut(position)
			}
		})
	}
}

// TestCrashCorruptByteDropsRest flips one byte inside a batch of the active segment, past the
// recovery point: the CRC fails, and that batch and every later one are dropped.
func TestCrashCorruptByteDropsRest(t *testing.T) {
	c := buildCrashedLog(t, 11, 3, 25, 0)
	gen := newBatchGen(5)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, i := range []int{1, len(c.positions) / 2, len(c.positions) - 1} {
		b := c.batches[c.activeStart+i]
		// Any byte after the CRC field: attributes, header fields covered by the CRC, or records.
		position := c.positions[i] + 21 + rng.Int64N(b.size()-21)
		dir := copyDir(t, c.dir)
		path := filepath.Join(dir, filepath.Base(c.activePath))
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		var one [1]byte
		f.ReadAt(one[:], position)
		one[0] ^= 1 << rng.IntN(8)
		if _, err := f.WriteAt(one[:], position); err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Run(fmt.Sprintf("batch%d", i), func(t *testing.T) {
			reopenAndCheck(t, dir, c.cfg, c.batches[:c.activeStart+i], gen.random())
		})
	}
}

// TestCrashKeepsFlushedData waits for durability at random points, crashes, and then destroys
// everything after the flushed position of the active file: nothing flushed may be lost.
func TestCrashKeepsFlushedData(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushByOS, FlushOnAppend} {
		t.Run(policy.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(policy), 8))
			gen := newBatchGen(uint64(policy))
			dir := t.TempDir()
			cfg := crashConfig()
			cfg.Flush = policy
			var want []storedBatch
			for round := 0; round < 12; round++ {
				l := openLog(t, dir, cfg)
				checkBatches(t, l, want)
				for i := rng.IntN(30); i >= 0; i-- {
					stored, _ := appendBatches(t, l, gen.random(), 1)
					want = append(want, stored...)
					if rng.IntN(5) == 0 {
						if err := l.WaitFlushed(context.Background(), stored[0].last); err != nil {
							t.Fatal(err)
						}
					}
				}
				l.abandon()
				flushed := l.FlushedOffset()
				// Every batch at or after the flushed offset may be lost: overwrite from its position.
				active := l.activeSegment()
				position := int64(0)
				keep := len(want)
				for i, b := range want {
					if b.base < active.baseOffset {
						continue
					}
					if b.base >= flushed {
						keep = i
						break
					}
					position += b.size()
				}
				junk := make([]byte, 1+rng.IntN(3000))
				for i := range junk {
					junk[i] = byte(rng.Uint32())
				}
				f, err := os.OpenFile(active.dataPath, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt(junk, position)
				f.Close()
				want = want[:keep]
				l = openLog(t, dir, cfg)
				if l.LogEndOffset() < flushed {
					t.Fatalf("round %d: recovery lost flushed offsets: end %d, flushed %d", round, l.LogEndOffset(), flushed)
				}
				checkBatches(t, l, want)
				l.abandon()
			}
		})
	}
}

// damagedIndexLog is a closed or crashed log of several segments with non-monotonic timestamps.
func damagedIndexLog(t *testing.T, crash bool) (string, Config, []storedBatch) {
	t.Helper()
	dir := t.TempDir()
	cfg := crashConfig()
	cfg.IndexIntervalBytes = 300
	gen := newBatchGen(21)
	l := openLog(t, dir, cfg)
	var batches []storedBatch
	for i := 0; i < 150; i++ {
		stored, _ := appendBatches(t, l, gen.random(), 0)
		batches = append(batches, stored...)
		if i == 140 {
			l.Sync(context.Background()) // a recovery point inside the active segment
		}
	}
	if crash {
		l.abandon()
	} else if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, cfg, batches
}

// TestRecoveryRebuildsDamagedIndexes deletes, cuts, zeroes and scrambles the offset and time indexes
// of every segment: Open rebuilds them from the data, and reads, lookups by time and each segment's
// newest timestamp (used by time retention) come out right.
func TestRecoveryRebuildsDamagedIndexes(t *testing.T) {
	damages := map[string]func(t *testing.T, path string){
		"missing": func(t *testing.T, path string) { os.Remove(path) },
		"empty":   func(t *testing.T, path string) { os.Truncate(path, 0) },
		"torn": func(t *testing.T, path string) {
			if info, err := os.Stat(path); err == nil && info.Size() > 5 {
				os.Truncate(path, info.Size()-5)
			}
		},
		"zeroed": func(t *testing.T, path string) {
			if info, err := os.Stat(path); err == nil {
				os.WriteFile(path, make([]byte, info.Size()), 0o644)
			}
		},
		"garbage": func(t *testing.T, path string) {
			info, err := os.Stat(path)
			if err != nil {
				return
			}
			junk := make([]byte, info.Size())
			rng := rand.New(rand.NewPCG(uint64(info.Size()), 1))
			for i := range junk {
				junk[i] = byte(rng.Uint32())
			}
			os.WriteFile(path, junk, 0o644)
		},
		"garbage-tail": func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return
			}
			f.Write([]byte("this is not an index entry, nor is this"))
			f.Close()
		},
	}
	for _, crash := range []bool{false, true} {
		dir, cfg, batches := damagedIndexLog(t, crash)
		for _, suffix := range []string{offsetSuffix, timeSuffix, "both"} {
			for name, damage := range damages {
				t.Run(fmt.Sprintf("crash=%v/%s/%s", crash, suffix, name), func(t *testing.T) {
					copied := copyDir(t, dir)
					paths, _ := filepath.Glob(filepath.Join(copied, "*"+suffix))
					if suffix == "both" {
						a, _ := filepath.Glob(filepath.Join(copied, "*"+offsetSuffix))
						b, _ := filepath.Glob(filepath.Join(copied, "*"+timeSuffix))
						paths = append(a, b...)
					}
					if len(paths) < 3 {
						t.Fatalf("only %d index files", len(paths))
					}
					for _, path := range paths {
						damage(t, path)
					}
					checkIndexedLog(t, copied, cfg, batches)
				})
			}
		}
	}
}

func checkIndexedLog(t *testing.T, dir string, cfg Config, batches []storedBatch) {
	t.Helper()
	for round := 0; round < 2; round++ { // the rebuilt indexes must also survive a clean reopen
		l := openLog(t, dir, cfg)
		checkBatches(t, l, batches)
		rng := rand.New(rand.NewPCG(5, 6))
		checkTimestampLookups(t, l, batches, rng, 200)
		m := &logModel{batches: batches, end: batches[len(batches)-1].last + 1}
		for i := 0; i < 300; i++ {
			checkRead(t, l, m, rng.Int64N(m.end), rng.Int64N(12<<10), math.MaxInt64)
		}
		bases := segmentBases(l)
		segments := segmentOf(batches, bases)
		for k, s := range l.segmentList() {
			newest := int64(-1)
			for i, b := range batches {
				if segments[i] == k {
					newest = max(newest, b.maxTimestamp)
				}
			}
			if got := s.maxTimestamp.Load(); got != newest {
				t.Fatalf("segment %d: newest timestamp %d, want %d", s.baseOffset, got, newest)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenLeavesStrayFilesAlone puts files and directories that are not segments in the log
// directory: Open neither fails nor touches them.
func TestOpenLeavesStrayFilesAlone(t *testing.T) {
	dir := t.TempDir()
	cfg := crashConfig()
	gen := newBatchGen(3)
	l := openLog(t, dir, cfg)
	var want []storedBatch
	for i := 0; i < 40; i++ {
		stored, _ := appendBatches(t, l, gen.random(), 0)
		want = append(want, stored...)
	}
	l.abandon()
	strays := map[string]string{
		"README.txt":                    "hello",
		"foo.log":                       "not a segment",
		"foo.index":                     "nor this",
		"00000000000000000abc.log":      "almost a segment name",
		"+0000000000000000005.log":      "a name ParseInt would accept",
		"0000000000000000000.log":       "one digit short",
		".00000000000000000000.log.swp": "an editor's",
	}
	for name, content := range strays {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"snapshots", "99999999999999999999.log"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	segmentFiles, _ := filepath.Glob(filepath.Join(dir, "0*.log"))
	for round := 0; round < 2; round++ {
		l = openLog(t, dir, cfg)
		checkBatches(t, l, want)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range strays {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != content {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if after, _ := filepath.Glob(filepath.Join(dir, "0*.log")); len(after) != len(segmentFiles) {
		t.Errorf("segment files %v became %v", segmentFiles, after)
	}
	for _, name := range []string{"snapshots", "99999999999999999999.log"} {
		if info, err := os.Stat(filepath.Join(dir, name)); err != nil || !info.IsDir() {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStaleRecoveryPoint writes recovery points that claim more than the data holds, or are damaged:
// recovery trusts only what checks out.
func TestStaleRecoveryPoint(t *testing.T) {
	c := buildCrashedLog(t, 13, 3, 12, 0)
	activeBase := c.batches[c.activeStart].base
	end := c.batches[len(c.batches)-1].last + 1
	// point writes the current format with the time index fields claiming 1000 entries (more than
	// any segment here has, so the time index is replayed); legacy the 28-byte format older versions
	// wrote, with no time index fields.
	point := func(segmentBase, position, next int64) []byte {
		raw := make([]byte, recoveryPointSize)
		binary.BigEndian.PutUint64(raw, uint64(segmentBase))
		binary.BigEndian.PutUint64(raw[8:], uint64(position))
		binary.BigEndian.PutUint64(raw[16:], uint64(next))
		binary.BigEndian.PutUint32(raw[24:], crc32.Checksum(raw[:24], castagnoli))
		binary.BigEndian.PutUint64(raw[28:], 1000)
		binary.BigEndian.PutUint32(raw[52:], crc32.Checksum(raw[:52], castagnoli))
		return raw
	}
	legacy := func(segmentBase, position, next int64) []byte {
		return point(segmentBase, position, next)[:legacyRecoveryPointSize]
	}
	badCRC := point(activeBase, 100, end)
	badCRC[3] ^= 1
	extra := newBatchGen(1).next(2, 50)
	for name, raw := range map[string][]byte{
		"beyond-data":          point(activeBase, c.activeEnd()+10<<10, end+1000),
		"beyond-file":          point(activeBase, 1<<40, 1<<40),
		"mid-batch":            point(activeBase, c.positions[3]+7, c.batches[c.activeStart+3].base+1),
		"future-segment":       point(end+500, 0, end+500),
		"first-segment":        point(0, 1<<20, end),
		"bad-crc":              badCRC,
		"short":                point(activeBase, 0, activeBase)[:20],
		"zeroes":               make([]byte, recoveryPointSize),
		"negative":             point(-5, -100, -100),
		"wrong-segment-offset": point(activeBase, c.positions[5], 3),
		"legacy-beyond-data":   legacy(activeBase, c.activeEnd()+10<<10, end+1000),
		"legacy-mid-batch":     legacy(activeBase, c.positions[3]+7, c.batches[c.activeStart+3].base+1),
		"legacy-bad-crc":       append(legacy(activeBase, 100, end)[:24], 1, 2, 3, 4),
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyDir(t, c.dir)
			if err := os.WriteFile(filepath.Join(dir, recoveryPointFile), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			reopenAndCheck(t, dir, c.cfg, c.batches, extra)
		})
	}
	// A stale point beyond the data and a torn tail together: the tail still goes.
	dir := copyDir(t, c.dir)
	os.WriteFile(filepath.Join(dir, recoveryPointFile), point(activeBase, c.activeEnd()+100, end+5), 0o644)
	cut := c.positions[len(c.positions)-1] + 30
	os.Truncate(filepath.Join(dir, filepath.Base(c.activePath)), cut)
	reopenAndCheck(t, dir, c.cfg, c.survivors(cut), extra)
}

// TestCleanCloseThenCrash checks the clean-shutdown marker: a log closed cleanly, reopened, appended
// to and crashed must not be mistaken for clean.
func TestCleanCloseThenCrash(t *testing.T) {
	dir := t.TempDir()
	cfg := crashConfig()
	gen := newBatchGen(17)
	var want []storedBatch
	l := openLog(t, dir, cfg)
	for i := 0; i < 30; i++ {
		stored, _ := appendBatches(t, l, gen.random(), 0)
		want = append(want, stored...)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean marker after Close: %v", err)
	}
	l = openLog(t, dir, cfg)
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("clean marker still there after Open: %v", err)
	}
	for i := 0; i < 10; i++ {
		stored, _ := appendBatches(t, l, gen.random(), 0)
		want = append(want, stored...)
	}
	l.abandon()
	// Tear the last batch: a log taken for clean would not scan for it.
	active := filepath.Join(dir, fmt.Sprintf("%020d.log", segmentBases(l)[len(segmentBases(l))-1]))
	var activeBytes int64
	for _, b := range want {
		if b.base >= segmentBases(l)[len(segmentBases(l))-1] {
			activeBytes += b.size()
		}
	}
	if err := os.Truncate(active, activeBytes-1); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	checkBatches(t, l, want[:len(want)-1])
	l.Close()
}
