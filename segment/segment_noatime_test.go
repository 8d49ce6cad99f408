package segment

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDataFilesOpenWithoutAccessTimes: reads of a segment (fetches, sendfile) must not update its
// access time, which on ext4 goes through the journal and can wait for a slow commit.
func TestDataFilesOpenWithoutAccessTimes(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig())
	defer l.Close()
	if _, err := l.Append(bytes.Clone(testBatch(t, "a", 2, 40)), 0); err != nil {
		t.Fatal(err)
	}
	file := l.activeSegment().file
	raw, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", file.Fd()))
	if err != nil {
		t.Skipf("no fdinfo here: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if value, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(value), 8, 64)
			if err != nil {
				t.Fatalf("fdinfo flags %q: %v", value, err)
			}
			if flags&unix.O_NOATIME == 0 {
				t.Fatalf("data file %s open with flags %o, without O_NOATIME", file.Name(), flags)
			}
			return
		}
	}
	t.Fatalf("no flags line in fdinfo: %s", raw)
}
