package segment

import (
	"context"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages reports, for each page of the active segment's data file below size, whether it is
// in the page cache.
func residentPages(t *testing.T, l *Log, size int64) []bool {
	t.Helper()
	active := l.activeSegment()
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(active.file.Fd()), &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the test directory is on tmpfs, whose pages cannot be dropped")
	}
	mapped, err := unix.Mmap(int(active.file.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mapped)
	pageSize := int64(unix.Getpagesize())
	vec := make([]byte, (size+pageSize-1)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mapped[0])), uintptr(len(mapped)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	resident := make([]bool, len(vec))
	for i, v := range vec {
		resident[i] = v&1 != 0
	}
	return resident
}

// fillActiveSegment appends about n bytes of batches to one active segment and fsyncs them.
func fillActiveSegment(t *testing.T, l *Log, n int64) int64 {
	t.Helper()
	for l.activeSegment().size() < n {
		if _, err := l.Append(testBatch(t, "a", 16, 4000), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l.activeSegment().size()
}

// Once the active segment is clean up to a position, the log drops its cached pages more than
// TailCacheBytes behind it and keeps the tail that consumers and followers read.
func TestDropBehindKeepsOnlyTheTailCached(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Flush = FlushByOS
	cfg.WritebackBytes = 0 // only the fsync below cleans the pages
	cfg.TailCacheBytes = 2 << 20
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	size := fillActiveSegment(t, l, 16<<20)
	dropped := (size - cfg.TailCacheBytes) &^ (dropAlign - 1)
	awaitMark(t, l, "the drop of cached pages", droppedMark, dropped) // it follows the fsync's waiters

	resident := residentPages(t, l, size)
	pageSize := int64(unix.Getpagesize())
	for i := int64(0); i < dropped/pageSize; i++ {
		if resident[i] {
			t.Fatalf("page %d of %d (offset %d) is still cached; everything below %d should be dropped", i, len(resident), i*pageSize, dropped)
		}
	}
	for i := (size-cfg.TailCacheBytes)/pageSize + 1; i < int64(len(resident)); i++ {
		if !resident[i] {
			t.Fatalf("page %d (offset %d) of the kept tail [%d, %d) was dropped", i, i*pageSize, size-cfg.TailCacheBytes, size)
		}
	}
}

// TailCacheBytes 0 drops nothing: the kernel decides, as before.
func TestDropBehindOffDropsNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Flush = FlushByOS
	cfg.WritebackBytes = 0
	cfg.TailCacheBytes = 0
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	size := fillActiveSegment(t, l, 4<<20)
	for i, cached := range residentPages(t, l, size) {
		if !cached {
			t.Fatalf("page %d was dropped with TailCacheBytes 0", i)
		}
	}
}

func TestConfigRejectsNegativeTailCacheBytes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TailCacheBytes = -1
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative TailCacheBytes accepted")
	}
}

// Under FlushByOS the writebacks, not only fsyncs, drop what falls behind the kept tail.
func TestDropBehindFollowsWriteback(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Flush = FlushByOS
	cfg.WritebackBytes = 1 << 20
	cfg.TailCacheBytes = 2 << 20
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	for l.activeSegment().size() < 8<<20 {
		if _, err := l.Append(testBatch(t, "a", 16, 4000), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The last writeback asked for covers all but under WritebackBytes; its drop ends TailCacheBytes
	// behind that, rounded down to dropAlign.
	want := (l.activeSegment().size() - cfg.WritebackBytes - cfg.TailCacheBytes) &^ (dropAlign - 1)
	awaitMark(t, l, "the drop of cached pages", droppedMark, want)
	pageSize := int64(unix.Getpagesize())
	resident := residentPages(t, l, l.activeSegment().size())
	for i := int64(0); i < want/pageSize; i++ {
		if resident[i] {
			t.Fatalf("page %d (offset %d) is still cached after the writebacks dropped up to %d", i, i*pageSize, want)
		}
	}
}
