// Package smalldisk gives tests a disk that fills up: a small tmpfs mounted on a temporary
// directory, and a way to take all of its free space. Mounting needs root (CAP_SYS_ADMIN); where
// it is not permitted the test is skipped, saying so, rather than passed.
//
// Invariant: every mount is unmounted when its test ends (testing.TB.Cleanup).
package smalldisk

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes on a fresh temporary directory and returns the directory, or
// skips the test where mounting is not permitted.
func Mount(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	MountOn(t, dir, size)
	return dir
}

// MountOn mounts a tmpfs of size bytes on dir (created if missing), or skips the test where
// mounting is not permitted.
func MountOn(t testing.TB, dir string, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v); a full disk is not tested", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// Fill creates path and gives it all the free space of its filesystem; removing path makes room
// again.
func Fill(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail)*int64(st.Bsize)); err != nil {
		t.Fatalf("fill %s: %v", path, err)
	}
}
