package segment

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/index"
)

// A group-commit fsync that was in flight when Truncate cut the log must not then claim the cut
// offsets durable: they are written again, and a waiter for the new batches must get a new fsync.
func TestFlushRacingTruncateDoesNotOverclaim(t *testing.T) {
	inFsync := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	var fsyncs atomic.Int64
	cfg := smallConfig()
	cfg.Flush = FlushByOS
	cfg.ObserveFsync = func(time.Duration) {
		fsyncs.Add(1)
		once.Do(func() { // park the first fsync after it synced, before it advances the flushed offset
			close(inFsync)
			<-release
		})
	}
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	appendN := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := l.Append(testBatch(t, "a", 2, 50), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(10)
	earlyWaiter := make(chan error, 1)
	go func() { earlyWaiter <- l.WaitFlushed(context.Background(), 19) }()
	<-inFsync
	if err := l.Truncate(4); err != nil {
		t.Fatal(err)
	}
	close(release)
	appendN(8) // offsets 4..19 again, only in the page cache
	if err := l.WaitFlushed(context.Background(), 19); err != nil {
		t.Fatal(err)
	}
	if n := fsyncs.Load(); n < 2 {
		t.Fatalf("offsets 4..19 reported flushed after %d fsync(s): the one that started before Truncate covered only the old bytes", n)
	}
	if err := <-earlyWaiter; err != nil {
		t.Fatal(err)
	}
	if l.FlushedOffset() > l.LogEndOffset() {
		t.Fatalf("flushed offset %d beyond log end %d", l.FlushedOffset(), l.LogEndOffset())
	}
}

// Close fsyncs everything appended, so a waiter for appended offsets still pending at Close has its
// data durable and must be told so, not handed ErrClosed (an acks=all producer would resend).
func TestCloseReleasesCoveredWaitersWithSuccess(t *testing.T) {
	dir := t.TempDir()
	failures := 0
	for i := 0; i < 40; i++ {
		l := openLog(t, dir, smallConfig())
		res, err := l.Append(testBatch(t, "c", 2, 30), 0)
		if err != nil {
			t.Fatal(err)
		}
		covered := make(chan error, 1)
		l.NotifyFlushed(res.LastOffset, func(err error) { covered <- err })
		beyond := make(chan error, 1)
		l.NotifyFlushed(res.LastOffset+1, func(err error) { beyond <- err })
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-covered; err != nil {
			failures++
		}
		if err := <-beyond; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter beyond the log end after Close: %v", err)
		}
	}
	if failures > 0 {
		t.Fatalf("%d of 40 waiters for data Close made durable got an error", failures)
	}
}

// A flush may sample the active segment just before Truncate retires it and retention (with no
// delete delay) closes it. The flush must then neither fail the log nor touch the closed descriptor
// (go test -race reports the latter).
func TestFlushOfSegmentClosedByRetention(t *testing.T) {
	cfg := smallConfig()
	cfg.FileDeleteDelay = 0
	cfg.Flush = FlushOnAppend
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	raw := testBatch(t, "r", 2, 40)
	for i := 0; i < 300; i++ {
		first, err := l.Append(bytes.Clone(raw), 0)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(bytes.Clone(raw), 0); err != nil { // pokes the flusher at the new segment
			t.Fatal(err)
		}
		if err := l.Truncate(first.BaseOffset); err != nil { // back into the previous segment: retires it...
			t.Fatal(err)
		}
		if _, err := l.ApplyRetention(); err != nil { // ...and closes it
			t.Fatal(err)
		}
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The flusher writes index entries at its checkpoints while the writer appends and truncates. After
// a clean close every entry in the index files must still name the batch it claims.
func TestIndexCheckpointsRacingTruncate(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 1 // an entry for every batch
	cfg.CheckpointInterval = 0 // index flush at every group commit
	cfg.Flush = FlushOnAppend
	dir := t.TempDir()
	l := openLog(t, dir, cfg)
	gen := newBatchGen(12)
	for i := 0; i < 400; i++ {
		var last AppendResult
		for n := 0; n < 4; n++ {
			res, err := l.Append(gen.next(2, 40), 0)
			if err != nil {
				t.Fatal(err)
			}
			last = res
		}
		if err := l.Truncate(last.BaseOffset - 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	defer l.Close()
	for _, s := range l.segmentList() {
		r := newHeaderReader(s.file, s.size())
		for _, e := range s.offsets.Entries() {
			if h, err := r.at(e.Position); err != nil || h.BaseOffset != e.Offset {
				t.Fatalf("offset index entry %+v names a batch at offset %d (%v)", e, h.BaseOffset, err)
			}
		}
		for _, e := range s.times.Entries() {
			if _, h, err := s.scanFor(r, index.OffsetEntry{Offset: s.baseOffset}, e.Offset); err != nil || h.BaseOffset != e.Offset || h.MaxTimestamp != e.Timestamp {
				t.Fatalf("time index entry %+v names batch %+v (%v)", e, h, err)
			}
		}
	}
}

// The flusher yields once before each fsync under Config.FlushYield and never without it, and the
// setting takes effect on a reconfigured log.
func TestFlushYieldFollowsConfig(t *testing.T) {
	cfg := smallConfig()
	cfg.FlushYield = false
	l := openLog(t, t.TempDir(), cfg)
	var yields atomic.Int32
	l.flush.yield = func() { yields.Add(1) } // before any flush: the poke orders it before the read
	appendAndSync := func(name string) {
		t.Helper()
		if _, err := l.Append(testBatch(t, name, 2, 30), 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	appendAndSync("a")
	if n := yields.Load(); n != 0 {
		t.Fatalf("flusher yielded %d times with FlushYield off", n)
	}
	cfg.FlushYield = true
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	appendAndSync("b")
	if n := yields.Load(); n == 0 {
		t.Fatal("flusher did not yield with FlushYield on")
	}
}
