package segment

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Drop-behind: a log written at line rate fills the page cache with pages nobody reads again (a
// tailing consumer and the followers read the last few megabytes), and the kernel keeps them until
// memory runs short. New page-cache pages then come from memory the process has not touched
// lately, and on a virtual machine whose host reclaims idle guest memory each such page costs a
// host fault: a 3-node cluster at 375,000 msg/s ran at p99 8 ms for 38 s, until its page cache had
// grown by 4.3 GB, and at 10-85 ms after that, with the kernel's copy into the page cache
// (copy_folio_from_iter_atomic) grown from 0.9 % to 19 % of all CPU samples.
//
// So once the active segment is clean up to some position (a writeback or an fsync ended there),
// the flusher drops its cached pages more than Config.TailCacheBytes behind that position
// (posix_fadvise POSIX_FADV_DONTNEED, which drops clean pages only), in whole dropAlign blocks.
// The page cache a log holds for its active segment stays about TailCacheBytes, and the
// pages it frees are the next ones it fills. A reader further behind than that reads from the disk
// (and its pages stay cached until the kernel needs them); sealed segments are left to the kernel.

// dropAlign is what each drop's end is rounded down to, and so the least one advises (frequent
// fsyncs do not each cost a system call). The kernel caches a file in folios of up to 2 MiB,
// aligned to their size, and keeps any that a dropped range covers only in part: with ends at
// arbitrary positions, one folio survived at each end.
const dropAlign = 2 << 20

// dropBehind drops the active segment's cached pages below clean minus Config.TailCacheBytes that
// an earlier call has not. clean is a position below which active has no dirty page. It runs on
// the flusher goroutine; a failure only leaves pages to the kernel, so it is logged once.
func (f *flusher) dropBehind(active *segment, clean int64) {
	keep := f.log.config.Load().TailCacheBytes
	if keep <= 0 {
		return
	}
	f.mu.Lock()
	from := int64(0)
	if f.mu.dropped.segment == active {
		from = f.mu.dropped.position
	}
	to := (clean - keep) &^ (dropAlign - 1)
	if to <= from {
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	err := active.dropCache(from, to)
	f.mu.Lock()
	f.mu.dropped = writebackMark{active, to} // only this goroutine drops: nothing moved it meanwhile
	logged := f.mu.dropFailed
	f.mu.dropFailed = f.mu.dropFailed || err != nil
	f.mu.Unlock()
	if logger := f.log.config.Load().Logger; err != nil && logger != nil && !logged {
		logger.Warn("segment: dropping written pages from the page cache failed; leaving them to the kernel", "dir", f.log.dir, "err", err)
	}
}

// dropCache advises the kernel that the data file's pages in [from, to) will not be read soon.
func (s *segment) dropCache(from, to int64) error {
	s.closing.RLock()
	defer s.closing.RUnlock()
	if s.closing.closed {
		return nil
	}
	err := unix.Fadvise(int(s.file.Fd()), from, to-from, unix.FADV_DONTNEED)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("segment: fadvise DONTNEED %s [%d, %d): %w", s.dataPath, from, to, err)
	}
	return nil
}
