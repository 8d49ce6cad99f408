package coordinator

// Space kept for Raft on a full disk. The Raft log (raft.db) shares its disk with the partitions'
// segments; once that disk is full, a write to the log fails, and a leader whose log cannot take
// its own entries steps down, is elected again (its log is the most complete) and steps down
// again, so the cluster has no controller for as long as the disk stays full. Worse, a failed
// write of Raft's term or vote stops the process. So the node keeps a ballast file of
// Config.BallastBytes beside raft.db: when a write to the Raft store fails for lack of space the
// ballast is deleted and the write is tried again, once. Once the disk has room for it twice over,
// the ballast is laid again.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"golang.org/x/sys/unix"
)

// ballastCheckInterval is how often a released ballast's disk is checked for room to lay it again.
const ballastCheckInterval = 2 * time.Second

// ballast is a file whose space is given up when the Raft store runs out of it.
type ballast struct {
	path   string
	size   int64
	logger *slog.Logger
	mu     struct {
		sync.Mutex
		laid      bool
		lastCheck time.Time
	}
}

// newBallast lays a ballast of size bytes at path (size 0: none). A disk already too full for it
// is not an error: the ballast is laid later, when there is room.
func newBallast(path string, size int64, logger *slog.Logger) *ballast {
	b := &ballast{path: path, size: size, logger: logger}
	if size > 0 {
		b.mu.Lock()
		b.layLocked(time.Now())
		b.mu.Unlock()
	}
	return b
}

// layLocked writes the ballast if the disk has room for it twice over.
func (b *ballast) layLocked(now time.Time) {
	b.mu.lastCheck = now
	if info, err := os.Stat(b.path); err == nil && info.Size() == b.size {
		b.mu.laid = true
		return
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(b.path), &fs); err != nil || int64(fs.Bavail)*int64(fs.Bsize) < 2*b.size {
		return
	}
	if err := allocate(b.path, b.size); err != nil {
		os.Remove(b.path)
		b.logger.Warn("coordinator: could not lay the Raft store's ballast; trying again later", "path", b.path, "err", err)
		return
	}
	b.mu.laid = true
}

// allocate makes path a file of size bytes with its blocks allocated, and syncs it.
func allocate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = writeZeros(f, size)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func writeZeros(f *os.File, size int64) error {
	zeros := make([]byte, 1<<20)
	for written := int64(0); written < size; {
		n, err := f.Write(zeros[:min(int64(len(zeros)), size-written)])
		if err != nil {
			return err
		}
		written += int64(n)
	}
	return nil
}

// release deletes the ballast after err, a failed write to the Raft store, and reports whether
// space was freed (so that the write is worth trying again).
func (b *ballast) release(err error) bool {
	if b.size == 0 || !errors.Is(err, syscall.ENOSPC) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.mu.laid {
		return false
	}
	b.mu.laid = false
	b.mu.lastCheck = time.Now()
	if rmErr := os.Remove(b.path); rmErr != nil {
		b.logger.Error("coordinator: the Raft store's disk is full and its ballast could not be deleted", "path", b.path, "err", rmErr)
		return false
	}
	b.logger.Error("coordinator: the Raft store's disk is full; deleted its ballast to keep the Raft log writable", "path", b.path, "freed_bytes", b.size, "err", err)
	return true
}

// relay lays a released ballast again when it is time to look and the disk has room.
func (b *ballast) relay() {
	if b.size == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := time.Now(); !b.mu.laid && now.Sub(b.mu.lastCheck) >= ballastCheckInterval {
		b.layLocked(now)
		if b.mu.laid {
			b.logger.Info("coordinator: laid the Raft store's ballast again", "path", b.path)
		}
	}
}

// ballastedStore is the Raft log and stable store, whose writes fall back on the ballast.
type ballastedStore struct {
	*raftboltdb.BoltStore
	ballast *ballast
}

var (
	_ raft.LogStore    = (*ballastedStore)(nil)
	_ raft.StableStore = (*ballastedStore)(nil)
)

// write runs op, and once more if it failed for lack of space and the ballast was released.
func (s *ballastedStore) write(op func() error) error {
	s.ballast.relay()
	err := op()
	if err != nil && s.ballast.release(err) {
		err = op()
	}
	if err != nil {
		return fmt.Errorf("coordinator: raft store: %w", err)
	}
	return nil
}

func (s *ballastedStore) StoreLog(log *raft.Log) error {
	return s.write(func() error { return s.BoltStore.StoreLog(log) })
}

func (s *ballastedStore) StoreLogs(logs []*raft.Log) error {
	return s.write(func() error { return s.BoltStore.StoreLogs(logs) })
}

func (s *ballastedStore) DeleteRange(low, high uint64) error {
	return s.write(func() error { return s.BoltStore.DeleteRange(low, high) })
}

func (s *ballastedStore) Set(key, value []byte) error {
	return s.write(func() error { return s.BoltStore.Set(key, value) })
}

func (s *ballastedStore) SetUint64(key []byte, value uint64) error {
	return s.write(func() error { return s.BoltStore.SetUint64(key, value) })
}
