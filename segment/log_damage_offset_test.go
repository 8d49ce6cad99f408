package segment

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFirstDamagedOffset: the first offset of the earliest damaged range recovery kept, which a
// follower truncates to before fetching it again; none once the log is truncated there.
func TestFirstDamagedOffset(t *testing.T) {
	c := buildLaidOutLog(t, 53, []int{4, 1, 6}, false)
	clean := openLog(t, c.dir, c.cfg)
	if offset, ok := clean.FirstDamagedOffset(); ok {
		t.Fatalf("an intact log reports damage at %d", offset)
	}
	clean.Close()
	bad := 4 // the only batch of segment 1
	dir := c.damaged(t, 1, c.flipBit(1, c.at[bad]+20, 2))
	l := openLog(t, dir, c.cfg)
	defer l.Close()
	offset, ok := l.FirstDamagedOffset()
	if !ok || offset != c.batches[bad].base {
		t.Fatalf("first damaged offset %d, %v; want %d", offset, ok, c.batches[bad].base)
	}
	if err := l.Truncate(offset); err != nil {
		t.Fatal(err)
	}
	if got, ok := l.FirstDamagedOffset(); ok || l.LogEndOffset() != offset {
		t.Fatalf("after truncating at the damage: damage at %d (%v), log end %d; want none and %d", got, ok, l.LogEndOffset(), offset)
	}
}

// TestTruncateAtUnseenDamage garbles a batch header of an open log (damage recovery never saw):
// Truncate at that batch, or past it in the same segment, cuts at the last good boundary before
// it instead of failing, and the log takes appends there.
func TestTruncateAtUnseenDamage(t *testing.T) {
	for _, past := range []int{0, 2} {
		c := buildLaidOutLog(t, 59, []int{4, 1, 6}, true)
		dir := c.damaged(t, 0, c.files[c.dataName(0)]) // an intact copy
		l := openLog(t, dir, c.cfg)
		bad := 6 // the second batch of segment 2
		f, err := os.OpenFile(filepath.Join(dir, c.dataName(2)), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0x7f}, c.at[bad]+16); err != nil { // magic
			t.Fatal(err)
		}
		f.Close()
		if err := l.Truncate(c.batches[bad+past].base); err != nil {
			t.Fatalf("truncate to %d over a garbled header: %v", c.batches[bad+past].base, err)
		}
		if got := l.LogEndOffset(); got != c.batches[bad].base {
			t.Fatalf("log end %d, want %d (the garbled batch's start)", got, c.batches[bad].base)
		}
		checkBatches(t, l, c.batches[:bad])
		if res, err := l.Append(newBatchGen(1).next(1, 50), 9); err != nil || res.BaseOffset != c.batches[bad].base {
			t.Fatalf("append after the cut: %+v, %v", res, err)
		}
		l.Close()
	}
}
