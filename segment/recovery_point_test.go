package segment

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/index"
)

// TestRecoveryPointFormat writes a point and reads it back; its first 28 bytes are the format older
// versions (and chaos/nemesis) read, and a time index part that does not check out leaves the point
// usable with the time index unknown.
func TestRecoveryPointFormat(t *testing.T) {
	l := &Log{dir: t.TempDir()}
	want := recoveryPoint{segmentBase: 81920, position: 123456, nextOffset: 90000, timeEntries: 42,
		lastTime: index.TimeEntry{Timestamp: 1_700_000_000_123, Offset: 89990}}
	if err := l.writeRecoveryPoint(want, true); err != nil {
		t.Fatal(err)
	}
	if got, ok := readRecoveryPoint(l.dir); !ok || got != want {
		t.Fatalf("read back %+v %v, want %+v", got, ok, want)
	}
	path := filepath.Join(l.dir, recoveryPointFile)
	raw, err := os.ReadFile(path)
	if err != nil || len(raw) != recoveryPointSize {
		t.Fatalf("%d bytes, %v", len(raw), err)
	}
	if crc32.Checksum(raw[:24], castagnoli) != binary.BigEndian.Uint32(raw[24:]) ||
		int64(binary.BigEndian.Uint64(raw[8:])) != want.position {
		t.Fatal("the first 28 bytes are not the old format")
	}
	unknown := want
	unknown.timeEntries, unknown.lastTime = unknownTimeIndex, index.TimeEntry{}
	for name, data := range map[string][]byte{
		"old format":     raw[:legacyRecoveryPointSize],
		"torn time part": append(append([]byte(nil), raw[:40]...), make([]byte, 16)...),
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, ok := readRecoveryPoint(l.dir); !ok || got != unknown {
			t.Errorf("%s: read %+v %v, want %+v", name, got, ok, unknown)
		}
	}
	bad := append([]byte(nil), raw...)
	bad[9] ^= 1
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := readRecoveryPoint(l.dir); ok {
		t.Errorf("a point with a damaged position was read: %+v", got)
	}
}
