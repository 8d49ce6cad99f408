package segment

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// benchBatch builds one batch of exactly size bytes (records of about 1 KiB).
func benchBatch(tb testing.TB, size int) []byte {
	tb.Helper()
	var b batch.Builder
	b.Reset(time.UnixMilli(1_700_000_000_000))
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte(i * 7)
	}
	for b.Size()+len(value)+20 < size {
		b.Add(batch.Record{Value: value})
	}
	// Pad with one last record whose value makes the batch exactly size bytes.
	for pad := size - b.Size() - 8; pad >= 0; pad-- {
		var try batch.Builder
		try.Reset(time.UnixMilli(1_700_000_000_000))
		for n := b.Len(); n > 0; n-- {
			try.Add(batch.Record{Value: value})
		}
		try.Add(batch.Record{Value: make([]byte, pad)})
		if try.Size() == size {
			return append([]byte(nil), try.Finish()...)
		}
	}
	tb.Fatalf("cannot build a batch of %d bytes", size)
	return nil
}

func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

var benchSizes = []int{1 << 10, 16 << 10, 256 << 10}

// BenchmarkAppend measures buffered appends (FlushByOS) into the page cache: each append writes new
// pages of a preallocated segment. When a segment fills, the log is replaced by a fresh one with the
// timer stopped, so rolls (which fsync the whole segment: disk speed) are not counted, and deleting
// the old log drops its dirty pages before writeback can throttle the writer.
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("batch="+sizeName(size), func(b *testing.B) {
			raw := benchBatch(b, size)
			cfg := DefaultConfig()
			cfg.SegmentBytes = 256 << 20
			parent := b.TempDir()
			logs := 0
			open := func() *Log {
				logs++
				l, err := Open(filepath.Join(parent, strconv.Itoa(logs)), cfg)
				if err != nil {
					b.Fatal(err)
				}
				return l
			}
			l := open()
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if l.activeSegment().size()+int64(len(raw)) > cfg.SegmentBytes {
					b.StopTimer()
					l.Delete(nil)
					l = open()
					b.StartTimer()
				}
				if _, err := l.Append(raw, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			l.Delete(nil)
		})
	}
}

// BenchmarkGroupCommit has 8 appenders each append a batch and wait for it to be fdatasynced
// (FlushOnAppend, acks=all): one fdatasync covers whatever all of them appended before it started.
// Retention keeps the log at a few small segments so the benchmark needs little disk.
func BenchmarkGroupCommit(b *testing.B) {
	const appenders = 8
	for _, size := range benchSizes {
		b.Run("batch="+sizeName(size), func(b *testing.B) {
			var fsyncs atomic.Int64
			cfg := DefaultConfig()
			cfg.Flush = FlushOnAppend
			cfg.SegmentBytes = 32 << 20
			cfg.RetentionBytes = 64 << 20
			cfg.RetentionTime = -1
			cfg.FileDeleteDelay = 0
			cfg.ObserveFsync = func(time.Duration) { fsyncs.Add(1) }
			l, err := Open(b.TempDir(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Delete(nil)
			raw := benchBatch(b, size)
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, appenders)
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			b.ResetTimer()
			for a := 0; a < appenders; a++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mine := append([]byte(nil), raw...) // Append rewrites offsets in place
					for next.Add(1) <= int64(b.N) {
						res, err := l.Append(mine, 0)
						if err == nil {
							err = l.WaitFlushed(context.Background(), res.LastOffset)
						}
						if err == nil && l.SegmentCount() > 3 {
							_, err = l.ApplyRetention()
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/float64(max(fsyncs.Load(), 1)), "appends/fsync")
		})
	}
}

// BenchmarkSlice measures finding a range to send (index lookup, header scan, budget) in a 64 MiB
// segment of 1 KiB batches, for several byte budgets; BenchmarkRead also copies the range out.
func BenchmarkSlice(b *testing.B) {
	l, batches := benchReadLog(b)
	for _, budget := range []int{1, 64 << 10, 1 << 20} {
		b.Run("maxBytes="+sizeName(max(budget, 1024)), func(b *testing.B) {
			offsets := randomOffsets(batches)
			b.ReportAllocs()
			var total int64
			for i := 0; i < b.N; i++ {
				s, err := l.Slice(offsets[i&1023], int64(budget), math.MaxInt64)
				if err != nil || s.Size == 0 {
					b.Fatal(s, err)
				}
				total += s.Size
			}
			b.SetBytes(total / int64(b.N))
		})
	}
}

func BenchmarkRead(b *testing.B) {
	l, batches := benchReadLog(b)
	for _, budget := range []int{1, 64 << 10, 1 << 20} {
		b.Run("maxBytes="+sizeName(max(budget, 1024)), func(b *testing.B) {
			offsets := randomOffsets(batches)
			buf := make([]byte, 0, budget+(1<<10))
			b.ReportAllocs()
			var total int64
			for i := 0; i < b.N; i++ {
				got, err := l.Read(offsets[i&1023], int64(budget), math.MaxInt64, buf)
				if err != nil || len(got) == 0 {
					b.Fatal(err)
				}
				total += int64(len(got))
			}
			b.SetBytes(total / int64(b.N))
		})
	}
}

func benchReadLog(b *testing.B) (*Log, int64) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 128 << 20
	l, err := Open(b.TempDir(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Delete(nil) })
	raw := benchBatch(b, 1<<10)
	for l.Size() < 64<<20 {
		if _, err := l.Append(raw, 0); err != nil {
			b.Fatal(err)
		}
	}
	return l, l.LogEndOffset()
}

func randomOffsets(end int64) []int64 {
	rng := rand.New(rand.NewPCG(1, 1))
	offsets := make([]int64, 1024)
	for i := range offsets {
		offsets[i] = rng.Int64N(end)
	}
	return offsets
}

// BenchmarkRecover times Open of a 1 GiB log (one full segment) with its pages in the page cache.
// crash-unflushed: nothing was fsynced since the segment started, so recovery validates every batch
// (CRC) and rebuilds both indexes. crash-flushed: the log was synced just before the crash, so
// recovery resumes at the recovery point and replays the time index from the batch headers. clean:
// the log was closed cleanly, so Open trusts it and reads only the tail after the last index entry. The log is built once per sub-benchmark; each iteration restores the state it opens.
func BenchmarkRecover(b *testing.B) {
	for _, c := range []struct {
		size int
		mode string
	}{{16 << 10, "crash-unflushed"}, {1 << 10, "crash-unflushed"}, {16 << 10, "crash-flushed"}, {1 << 10, "crash-flushed"}, {1 << 10, "clean"}} {
		name := fmt.Sprintf("batch=%s/%s", sizeName(c.size), c.mode)
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 1 << 30
			cfg.CheckpointInterval = 0
			dir := b.TempDir()
			l, err := Open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			raw := benchBatch(b, c.size)
			for l.Size() < 1<<30 {
				if _, err := l.Append(raw, 0); err != nil {
					b.Fatal(err)
				}
			}
			if l.SegmentCount() != 1 || l.Size() != 1<<30 {
				b.Fatalf("%d segments, %d bytes", l.SegmentCount(), l.Size())
			}
			if c.mode == "crash-flushed" {
				// One group-commit cycle on this goroutine: the fsync, then (CheckpointInterval 0)
				// the recovery point. Under FlushByOS nothing else wakes the flusher meanwhile.
				l.flush.flushOnce()
				if point, ok := readRecoveryPoint(dir); !ok || point.position != 1<<30 {
					b.Fatalf("recovery point after the flush: %+v %v", point, ok)
				}
			}
			end := l.LogEndOffset()
			stop := func(l *Log) {
				if c.mode != "clean" {
					l.abandon()
				} else if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
			stop(l)
			point, err := os.ReadFile(filepath.Join(dir, recoveryPointFile))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(1 << 30)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := Open(dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if l.LogEndOffset() != end || l.Size() != 1<<30 {
					b.Fatalf("recovered to %d (%d bytes), want %d", l.LogEndOffset(), l.Size(), end)
				}
				stop(l)
				if c.mode != "clean" {
					if err := os.WriteFile(filepath.Join(dir, recoveryPointFile), point, 0o644); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
		})
	}
}
