package segment

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Writeback: under FlushByOS nothing the log writes is flushed until the kernel decides to, and the
// kernel decides late. Its background writeback starts when dirty pages pass
// vm.dirty_background_ratio (10 % of memory: gigabytes on an ordinary box) and then writes all of
// them at once; appends into a file under that burst wait on its pages. A replicated broker at
// 375,000 msg/s (110 MB/s of page cache over three logs of each record) stalled 300-450 ms every
// twenty seconds that way. So the log writes back itself, a little at a time: once
// Config.WritebackBytes more have been appended to the active segment, the flusher goroutine writes
// that range to disk and waits for it (sync_file_range with SYNC_FILE_RANGE_WAIT_BEFORE, _WRITE and
// _WAIT_AFTER). That makes nothing durable (the disk's cache is not flushed, the flushed offset
// does not move); an fsync is still what makes data durable.
//
// It waits because starting the writeback without waiting stalled the appends instead. Writing
// into preallocated (unwritten) extents, each writeback converts extents in ext4's journal; with
// the writeback of many logs started and not waited for, a journal commit now and then waited on
// all of it, and every append, which updates the file's mtime through the journal, waited with it:
// 24 files written at 120 MB/s in 23 KiB appends saw writes stall 47-210 ms every 10-20 s in each
// 60 s run. Waiting on the flusher goroutine keeps one range per log in flight: in the same runs the
// writebacks themselves sometimes took 100-400 ms, and no write took over 5 ms.

// noteAppended counts n appended bytes toward the next writeback and, once there are
// Config.WritebackBytes of them, asks the flusher for one. The caller holds appendMu.
func (l *Log) noteAppended(n int64, cfg *Config) {
	if cfg.Flush != FlushByOS || cfg.WritebackBytes <= 0 {
		return
	}
	l.unwrittenBytes += n
	if l.unwrittenBytes < cfg.WritebackBytes {
		return
	}
	l.unwrittenBytes = 0
	select {
	case l.flush.writeback <- struct{}{}:
	default:
	}
}

// writebackOnce writes back the active segment from where the last one (or the last fsync) stopped
// up to its end, and waits for it. It runs on the flusher goroutine, so it never delays an append
// (an fsync asked for meanwhile waits, as it would for the same pages); a failure is no loss of
// data (the next fsync reports a real one), so it is not fatal.
func (f *flusher) writebackOnce() {
	l := f.log
	l.appendMu.Lock()
	if l.closed.Load() {
		l.appendMu.Unlock()
		return
	}
	active := l.activeSegment()
	end := active.size()
	l.appendMu.Unlock()

	f.mu.Lock()
	from := int64(0)
	if f.mu.writtenBack.segment == active {
		from = f.mu.writtenBack.position
	}
	f.mu.Unlock()
	if end <= from {
		return
	}
	err := active.writeBack(from, end)
	if err == nil {
		f.mu.Lock()
		f.mu.writtenBack = writebackMark{active, end}
		f.mu.Unlock()
		f.dropBehind(active, end)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.mu.writebackFailed {
		f.mu.writebackFailed = true
		if logger := l.config.Load().Logger; logger != nil {
			logger.Warn("segment: writeback failed; leaving it to the kernel", "dir", l.dir, "err", err)
		}
	}
}

// writebackMark is a position in one segment's data file.
type writebackMark struct {
	segment  *segment
	position int64
}

// writeBack writes the data file's bytes [from, to) to disk and waits until they are written
// (not flushed from the disk's cache, and not the file's metadata). A segment closed since has
// nothing left to write back.
func (s *segment) writeBack(from, to int64) error {
	s.closing.RLock()
	defer s.closing.RUnlock()
	if s.closing.closed {
		return nil
	}
	err := unix.SyncFileRange(int(s.file.Fd()), from, to-from,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil // a file system without it: the kernel's own writeback stays
	}
	if err != nil {
		return fmt.Errorf("segment: sync_file_range %s [%d, %d): %w", s.dataPath, from, to, err)
	}
	return nil
}
