package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/batch"
)

// emptyBatch is what compaction leaves of a batch whose records all went: its header, offsets kept.
func emptyBatch(b storedBatch) []byte {
	raw := bytes.Clone(b.raw[:batch.HeaderSize])
	binary.BigEndian.PutUint32(raw[8:], batch.MinBatchLength)
	binary.BigEndian.PutUint16(raw[21:], 0) // no codec: nothing to compress
	binary.BigEndian.PutUint32(raw[57:], 0) // no records
	batch.SetCRC(raw)
	return raw
}

// replaceFixture builds a log of several sealed segments and the cleaned version of the run
// [base, end) of them: every other batch emptied.
type replaceFixture struct {
	dir       string
	cfg       Config
	old, new  []storedBatch
	base, end int64
	cleaned   []byte // the replacement batches, back to back
}

func newReplaceFixture(t *testing.T) *replaceFixture {
	cfg := crashConfig()
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	gen := newBatchGen(11)
	f := &replaceFixture{dir: dir, cfg: cfg}
	for l.SegmentCount() < 6 {
		stored, _ := appendBatches(t, l, gen.random(), 3)
		f.old = append(f.old, stored...)
	}
	segments := l.Segments()
	f.base, f.end = segments[1].BaseOffset, segments[4].BaseOffset // three sealed segments
	for i, b := range f.old {
		switch {
		case b.base < f.base || b.base >= f.end || i%2 == 0:
			f.new = append(f.new, b)
		default:
			f.new = append(f.new, storedBatch{base: b.base, last: b.last, maxTimestamp: b.maxTimestamp, raw: emptyBatch(b)})
		}
		if b.base >= f.base && b.base < f.end {
			f.cleaned = append(f.cleaned, f.new[len(f.new)-1].raw...)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReplaceSwapsSegmentsAndKeepsOffsets(t *testing.T) {
	f := newReplaceFixture(t)
	l := openLog(t, f.dir, f.cfg)
	before, err := l.Slice(f.base, math.MaxInt32, math.MaxInt64) // a reader mid-send keeps its file
	if err != nil {
		t.Fatal(err)
	}
	oldBytes := make([]byte, before.Size)
	before.File.ReadAt(oldBytes, before.Position)
	r, err := l.BeginReplace(f.base, f.end)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append(f.cleaned); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	checkBatches(t, l, f.new)
	if got := len(l.Segments()); got != 4 {
		t.Fatalf("%d segments after replacing 3 by 1, want 4", got)
	}
	again := make([]byte, before.Size)
	if _, err := before.File.ReadAt(again, before.Position); err != nil || !bytes.Equal(again, oldBytes) {
		t.Fatalf("a slice taken before the swap reads differently after it: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, f.dir, f.cfg)
	checkBatches(t, l, f.new)
	// The log goes on: appends after reopening land after the old end.
	gen := newBatchGen(99)
	stored, _ := appendBatches(t, l, gen.random(), 4)
	checkBatches(t, l, append(append([]storedBatch(nil), f.new...), stored...))
	l.Close()
}

// TestReplaceCrashAtEveryStep cuts Commit after each of its steps, as a crash would, and reopens:
// the log holds the old segments before the commit point and the new one after it, whole either way,
// and no stray file of the swap is left.
func TestReplaceCrashAtEveryStep(t *testing.T) {
	f := newReplaceFixture(t)
	for crashAfter := 1; ; crashAfter++ {
		dir := copyDir(t, f.dir)
		l := openLog(t, dir, f.cfg)
		r, err := l.BeginReplace(f.base, f.end)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Append(f.cleaned); err != nil {
			t.Fatal(err)
		}
		r.crashAfter = crashAfter
		err = r.Commit()
		finished := err == nil
		if err != nil && !errors.Is(err, errCrashed) {
			t.Fatalf("crash after step %d: %v", crashAfter, err)
		}
		_, replaceErr := os.Stat(filepath.Join(dir, replaceFile))
		committed := finished || replaceErr == nil
		l.abandon()
		l = openLog(t, dir, f.cfg)
		want := f.old
		if committed {
			want = f.new
		}
		checkBatches(t, l, want)
		if strays, _ := filepath.Glob(filepath.Join(dir, "*"+cleanedSuffix)); len(strays) > 0 {
			t.Fatalf("crash after step %d: left %v", crashAfter, strays)
		}
		for _, name := range []string{replaceFile, replaceTempFile} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				t.Fatalf("crash after step %d: left %s", crashAfter, name)
			}
		}
		l.Close()
		if finished {
			if crashAfter < 8 {
				t.Fatalf("commit took only %d steps", crashAfter)
			}
			return
		}
	}
}

// TestReplaceCrashWhileWriting abandons a replacement half written: the old segments stay.
func TestReplaceCrashWhileWriting(t *testing.T) {
	f := newReplaceFixture(t)
	l := openLog(t, f.dir, f.cfg)
	r, err := l.BeginReplace(f.base, f.end)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append(f.cleaned[:batch.SizeAt(f.cleaned)]); err != nil {
		t.Fatal(err)
	}
	l.abandon()
	l = openLog(t, f.dir, f.cfg)
	checkBatches(t, l, f.old)
	if strays, _ := filepath.Glob(filepath.Join(f.dir, "*"+cleanedSuffix)); len(strays) > 0 {
		t.Fatalf("left %v", strays)
	}
	l.Close()
}

func TestReplaceRefusesWhatIsNotARunOfSealedSegments(t *testing.T) {
	f := newReplaceFixture(t)
	l := openLog(t, f.dir, f.cfg)
	defer l.Close()
	segments := l.Segments()
	last := segments[len(segments)-1]
	for _, c := range []struct{ base, end int64 }{
		{f.base + 1, f.end},                // not a segment base
		{f.base, f.end - 1},                // not a segment end
		{last.BaseOffset, last.NextOffset}, // the active segment
	} {
		if r, err := l.BeginReplace(c.base, c.end); err == nil {
			r.Abort()
			t.Errorf("replace [%d, %d) accepted", c.base, c.end)
		}
	}
	r, err := l.BeginReplace(f.base, f.end)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append(f.cleaned[batch.SizeAt(f.cleaned):]); err == nil {
		t.Error("a batch not at the replacement's next offset was accepted")
	}
	if err := r.Append(f.cleaned); err != nil {
		t.Fatal(err)
	}
	// Retention takes the segments meanwhile: the commit fails and changes nothing.
	cfg := l.Config()
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(); err == nil {
		t.Fatal("commit after retention removed the segments succeeded")
	}
	if strays, _ := filepath.Glob(filepath.Join(f.dir, "*"+cleanedSuffix)); len(strays) > 0 {
		t.Fatalf("left %v", strays)
	}
}

// TestReplaceThenTruncateAndRetain: the swapped-in segment serves the log's other writers at once:
// a truncation into it (a follower's divergent tail) and retention deleting it.
func TestReplaceThenTruncateAndRetain(t *testing.T) {
	f := newReplaceFixture(t)
	l := openLog(t, f.dir, f.cfg)
	r, err := l.BeginReplace(f.base, f.end)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append(f.cleaned); err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(); err != nil {
		t.Fatal(err)
	}
	var cut int
	for i, b := range f.new {
		if b.base >= f.base+(f.end-f.base)/2 {
			cut = i
			break
		}
	}
	if err := l.Truncate(f.new[cut].base); err != nil {
		t.Fatal(err)
	}
	checkBatches(t, l, f.new[:cut])
	gen := newBatchGen(7)
	stored, _ := appendBatches(t, l, gen.random(), 5)
	want := append(append([]storedBatch(nil), f.new[:cut]...), stored...)
	checkBatches(t, l, want)
	l.abandon()
	l = openLog(t, f.dir, f.cfg)
	checkBatches(t, l, want)
	cfg := l.Config()
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	if _, err := l.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if l.SegmentCount() != 1 {
		t.Fatalf("%d segments after retention", l.SegmentCount())
	}
	if files, _ := filepath.Glob(filepath.Join(f.dir, "*.log")); len(files) != 1 {
		t.Fatalf("segment files %v", files)
	}
	l.Close()
}
