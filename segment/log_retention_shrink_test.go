package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/trash"
)

// TestRetentionShrinksARetiredSegmentBeforeClosingIt: the last close of an unlinked segment frees
// all its blocks at once, so retention shrinks the data file a step at a time first. Another
// descriptor of the same file sees it shrunk to at most one step.
func TestRetentionShrinksARetiredSegmentBeforeClosingIt(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 20
	cfg.FileDeleteDelay = 0
	cfg.RetentionBytes = 0 // every sealed segment goes
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	defer l.Close()
	raw := testBatch(t, "r", 16, 1000)
	for written := 0; written < 3<<20; written += len(raw) {
		if _, err := l.Append(bytes.Clone(raw), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(bytes.Clone(raw), 0); err != nil {
		t.Fatal(err)
	}
	// The sealed segment's data file, held open as a reader outside the log would.
	held, err := os.Open(filepath.Join(dir, "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if info, err := held.Stat(); err != nil || info.Size() < 3<<20 {
		t.Fatalf("sealed segment before retention: %v, %v", info.Size(), err)
	}
	deleted, err := l.ApplyRetention()
	if err != nil || deleted != 1 {
		t.Fatalf("ApplyRetention: deleted %d, %v", deleted, err)
	}
	info, err := held.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if step := trash.DefaultConfig().Step; info.Size() > step {
		t.Fatalf("retired segment closed at %d bytes, want at most one step (%d)", info.Size(), step)
	}
}
