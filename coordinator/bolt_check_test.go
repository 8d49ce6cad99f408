package coordinator

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// closedRaftLog makes a node with some history, closes it and returns its config and raft.db path
// and size.
func closedRaftLog(t *testing.T) (Config, string, int64) {
	t.Helper()
	config := testConfig(t.TempDir())
	c := openTest(t, config)
	populate(t, c, "")
	for i := 0; i < 40; i++ {
		mustCreate(t, c, "filler-"+strings.Repeat("x", i), 2, 1, nil)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(config.DataDir, "raft.db")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return config, path, info.Size()
}

// TestTruncatedRaftLogIsAClearError cuts raft.db short at several points and reopens: Open must
// return ErrCorruptLog (a SIGBUS would kill the test binary), and an intact file must still open.
func TestTruncatedRaftLogIsAClearError(t *testing.T) {
	config, path, size := closedRaftLog(t)
	pageSize := int64(os.Getpagesize())
	if size%pageSize != 0 || size < 4*pageSize {
		t.Fatalf("raft.db of %d bytes: expected whole pages and some history", size)
	}
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Pages past the meta page's high-water mark are preallocated room: cutting them is harmless
	// (the last cut below), every other cut is damage.
	for _, cut := range []int64{size / 2, 2 * pageSize, pageSize + 100, size - 1, 10} {
		if err := os.WriteFile(path, original[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(testContext(t), config)
		if !errors.Is(err, ErrCorruptLog) {
			t.Fatalf("raft.db cut to %d of %d bytes: Open returned %v, want ErrCorruptLog", cut, size, err)
		}
		t.Logf("cut to %d: %v", cut, err)
	}
	highWaterMark := int64(binaryLittleEndianUint64(original[boltPageHeaderSize+40:]))
	if err := os.WriteFile(path, original[:max(highWaterMark*pageSize, 2*pageSize)], 0o600); err != nil {
		t.Fatal(err)
	}
	c := openTest(t, config)
	if _, ok := c.Metadata().Topics["kept"]; !ok {
		t.Fatal("the intact raft.db lost its topics")
	}
}

func binaryLittleEndianUint64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// TestCheckBoltFile covers the meta page checks on hand-made damage.
func TestCheckBoltFile(t *testing.T) {
	_, path, size := closedRaftLog(t)
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(os.Getpagesize())
	check := func(name string, damage func([]byte) []byte, wantCorrupt bool) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "raft.db")
			if err := os.WriteFile(file, damage(append([]byte(nil), original...)), 0o600); err != nil {
				t.Fatal(err)
			}
			err := checkBoltFile(file)
			if wantCorrupt != errors.Is(err, ErrCorruptLog) {
				t.Fatalf("checkBoltFile: %v, want corrupt %v", err, wantCorrupt)
			}
		})
	}
	same := func(b []byte) []byte { return b }
	check("intact", same, false)
	check("empty", func([]byte) []byte { return nil }, false)
	// One bad meta page: bolt falls back to the other, and so does the check.
	check("meta 0 damaged", func(b []byte) []byte { b[boltPageHeaderSize+20] ^= 0xff; return b }, false)
	check("meta 1 damaged", func(b []byte) []byte { b[pageSize+boltPageHeaderSize+20] ^= 0xff; return b }, false)
	check("both metas damaged", func(b []byte) []byte {
		b[boltPageHeaderSize+20] ^= 0xff
		b[pageSize+boltPageHeaderSize+20] ^= 0xff
		return b
	}, true)
	check("not a bolt file", func(b []byte) []byte { return []byte(strings.Repeat("raft", int(size)/4)) }, true)
	if err := checkBoltFile(filepath.Join(t.TempDir(), "absent.db")); err != nil {
		t.Fatalf("missing file: %v", err)
	}
}
