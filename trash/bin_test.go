package trash

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newBin(t *testing.T, config Config) *Bin {
	t.Helper()
	b, err := New(config, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// fill creates dir/name holding size bytes.
func fill(t *testing.T, dir, name string, size int) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// await polls cond until it holds, failing the test after 10 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// asideOf finds the directory dir was moved to.
func asideOf(t *testing.T, dir string) string {
	t.Helper()
	matches, err := filepath.Glob(dir + deletedInfix + "*")
	if err != nil || len(matches) != 1 {
		t.Fatalf("directories moved aside from %s: %v (%v)", dir, matches, err)
	}
	return matches[0]
}

func gone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}

func TestDiscardFreesTheNameAtOnceAndRemovesLater(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "orders-0")
	fill(t, dir, "00000000000000000000.log", 3<<20+123)
	fill(t, filepath.Join(dir, "nested"), "f", 10)
	// A long pause keeps the removal going while the test looks at the old name.
	b := newBin(t, Config{Step: 64 << 10, Pause: 20 * time.Millisecond})
	if err := b.Discard(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !gone(dir) {
		t.Fatalf("%s still exists after Discard", dir)
	}
	aside := asideOf(t, dir)
	fill(t, dir, "fresh", 1) // a topic re-created under the old name starts empty
	await(t, "the moved directory to be removed", func() bool { return gone(aside) && b.Pending() == 0 })
	if gone(filepath.Join(dir, "fresh")) {
		t.Fatal("the removal reached the new directory under the old name")
	}
}

func TestRemovalShrinksAFileInSteps(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "orders-1")
	const size = 1 << 20
	fill(t, dir, "data", size)
	b := newBin(t, Config{Step: 64 << 10, Pause: 20 * time.Millisecond})
	if err := b.Discard(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(asideOf(t, dir), "data")
	await(t, "the file to shrink part way", func() bool {
		info, err := os.Stat(data)
		return err == nil && info.Size() > 0 && info.Size() < size
	})
	await(t, "the file to be removed", func() bool { return gone(data) })
}

func TestCloseStopsBetweenStepsAndSweepFinishes(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "orders-2")
	const size = 1 << 20
	fill(t, dir, "data", size)
	b, err := New(Config{Step: 4 << 10, Pause: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Discard(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	aside := asideOf(t, dir)
	data := filepath.Join(aside, "data")
	await(t, "the first step", func() bool {
		info, err := os.Stat(data)
		return err == nil && info.Size() < size
	})
	b.Close()
	if gone(data) {
		t.Fatal("Close let the removal run to the end")
	}

	// A directory that was never moved aside is not the bin's to remove.
	kept := fill(t, filepath.Join(parent, "orders-3"), "data", 10)
	next := newBin(t, Config{Step: 4 << 10, Pause: 0})
	if err := next.Sweep(parent); err != nil {
		t.Fatal(err)
	}
	await(t, "the swept directory to be removed", func() bool { return gone(aside) && next.Pending() == 0 })
	if gone(kept) {
		t.Fatal("Sweep removed a directory that was not moved aside")
	}
}

func TestDiscardOfAMissingDirectory(t *testing.T) {
	b := newBin(t, DefaultConfig())
	if err := b.Discard(filepath.Join(t.TempDir(), "never-created"), time.Now()); err != nil {
		t.Fatalf("Discard of a missing directory: %v", err)
	}
	if b.Pending() != 0 {
		t.Fatalf("pending %d after discarding nothing", b.Pending())
	}
}

func TestSweepOfAMissingParent(t *testing.T) {
	b := newBin(t, DefaultConfig())
	if err := b.Sweep(filepath.Join(t.TempDir(), "topics")); err != nil {
		t.Fatalf("Sweep of a missing parent: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	err := Config{Step: 100, Pause: -time.Second}.Validate()
	if err == nil || !strings.Contains(err.Error(), "step 100") || !strings.Contains(err.Error(), "negative pause") {
		t.Fatalf("Validate of a bad config: %v", err)
	}
	if _, err := New(Config{}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("New accepted a zero Config")
	}
}
