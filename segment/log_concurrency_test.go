package segment

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// TestConcurrentReadersSeeWholeBatches runs one writer (appends of one to three batches, rolls,
// retention) against readers that read at random offsets and budgets and look up timestamps. Every
// read must be whole valid batches, dense, starting at the batch holding the offset, below upTo, and
// byte-identical to what was appended. Run it with -race.
func TestConcurrentReadersSeeWholeBatches(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 48 << 10
	cfg.IndexIntervalBytes = 1024
	cfg.Flush = FlushOnAppend
	cfg.RetentionTime = -1
	cfg.RetentionBytes = 400 << 10
	cfg.FileDeleteDelay = time.Hour // readers may still hold retired segments
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()

	var published sync.Map // base offset -> batch bytes as stored, recorded before Append
	var done atomic.Bool
	var writerErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		gen := newBatchGen(31)
		for i := 0; i < 1500; i++ {
			var raw []byte
			for n := 1 + gen.rng.IntN(3); n > 0; n-- {
				raw = append(raw, gen.random()...)
			}
			next := l.LogEndOffset()
			expected := bytes.Clone(raw)
			batch.Scan(expected, func(h batch.Header, b []byte) error {
				batch.SetBaseOffset(b, next)
				batch.SetLeaderEpoch(b, 7)
				published.Store(next, b)
				next += int64(h.LastOffsetDelta) + 1
				return nil
			})
			if _, err := l.Append(raw, 7); err != nil {
				writerErr = err
				return
			}
			switch gen.rng.IntN(60) {
			case 0:
				if err := l.Roll(); err != nil {
					writerErr = err
					return
				}
			case 1:
				if _, err := l.ApplyRetention(); err != nil {
					writerErr = err
					return
				}
			}
		}
	}()

	var reads, batchesSeen atomic.Int64
	readerErrs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			var buf []byte
			fail := func(err error) { readerErrs <- err }
			for !done.Load() {
				start, end := l.LogStartOffset(), l.LogEndOffset()
				if end == start {
					continue
				}
				offset := start + rng.Int64N(end-start)
				maxBytes := []int64{1, rng.Int64N(64 << 10), math.MaxInt64}[rng.IntN(3)]
				upTo := []int64{math.MaxInt64, offset + 1 + rng.Int64N(end-offset+10)}[rng.IntN(2)]
				got, err := l.Read(offset, maxBytes, upTo, buf)
				if errors.Is(err, ErrOffsetOutOfRange) && offset < l.LogStartOffset() {
					continue // retention moved the start since we looked
				}
				if err != nil {
					fail(err)
					return
				}
				reads.Add(1)
				buf = got
				next := int64(-1)
				valid, err := batch.Scan(got, func(h batch.Header, raw []byte) error {
					if next < 0 && (h.BaseOffset > offset || h.LastOffset() < offset) {
						return errors.New("first batch does not hold the offset")
					}
					if next >= 0 && h.BaseOffset != next {
						return errors.New("batches not dense")
					}
					if h.LastOffset() >= upTo {
						return errors.New("batch at or beyond upTo")
					}
					want, ok := published.Load(h.BaseOffset)
					if !ok || !bytes.Equal(raw, want.([]byte)) {
						return errors.New("batch differs from the one appended")
					}
					next = h.NextOffset()
					batchesSeen.Add(1)
					return nil
				})
				if err != nil || valid != len(got) {
					fail(errors.Join(err, errors.New("read is not whole valid batches")))
					return
				}
				if rng.IntN(20) == 0 {
					if _, _, _, err := l.OffsetForTimestamp(1_700_000_000_000 + rng.Int64N(100_000)); err != nil {
						fail(err)
						return
					}
				}
			}
		}(uint64(r))
	}
	wg.Wait()
	close(readerErrs)
	for err := range readerErrs {
		t.Error(err)
	}
	if writerErr != nil {
		t.Fatal(writerErr)
	}
	if reads.Load() == 0 {
		t.Fatal("readers read nothing")
	}
	t.Logf("%d reads, %d batches checked, %d segments", reads.Load(), batchesSeen.Load(), l.SegmentCount())
}

// TestWaitFlushedFromManyAppenders has 8 goroutines append and wait for their own batches to be
// durable, as acks=all producers do, under each flush policy; then one more waiter is left pending
// and Close must release it.
func TestWaitFlushedFromManyAppenders(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushOnAppend, FlushByOS, FlushOnInterval} {
		t.Run(policy.String(), func(t *testing.T) {
			var fsyncs atomic.Int64
			cfg := DefaultConfig()
			cfg.SegmentBytes = 256 << 10
			cfg.Flush = policy
			cfg.FlushInterval = 2 * time.Millisecond
			cfg.ObserveFsync = func(time.Duration) { fsyncs.Add(1) }
			l := openLog(t, t.TempDir(), cfg)
			const appenders, perAppender = 8, 60
			var wg sync.WaitGroup
			errs := make(chan error, appenders)
			for a := 0; a < appenders; a++ {
				wg.Add(1)
				go func(a int) {
					defer wg.Done()
					raw := testBatch(t, "x", 4, 200)
					for i := 0; i < perAppender; i++ {
						res, err := l.Append(bytes.Clone(raw), 0)
						if err == nil {
							err = l.WaitFlushed(context.Background(), res.LastOffset)
						}
						if err == nil && l.FlushedOffset() <= res.LastOffset {
							err = errors.New("WaitFlushed returned before the flushed offset covered the batch")
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}(a)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if l.FlushedOffset() != l.LogEndOffset() {
				t.Fatalf("flushed %d, end %d", l.FlushedOffset(), l.LogEndOffset())
			}
			t.Logf("%d waits shared %d group-commit fsyncs", appenders*perAppender, fsyncs.Load())
			// A waiter for an offset not yet appended is released, with an error, by Close.
			pending := make(chan error, 1)
			go func() { pending <- l.WaitFlushed(context.Background(), l.LogEndOffset()+100) }()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-pending; !errors.Is(err, ErrClosed) {
				t.Fatalf("pending waiter after Close: %v", err)
			}
		})
	}
}

// TestSliceNeverCrossesUpTo has readers ask for everything from the last batch up to the log end they
// just read, as a fetch at the high watermark does, while a writer appends small batches as fast as
// it can: no Slice may hold a batch at or beyond upTo, whatever the writer publishes in between.
func TestSliceNeverCrossesUpTo(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 30 // no rolls: every read races the writer on the active segment
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	raw := testBatch(t, "u", 1, 8)
	if _, err := l.Append(bytes.Clone(raw), 0); err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			if _, err := l.Append(bytes.Clone(raw), 0); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const reads = 50_000 // the old two-load Slice failed within the first thousand under -race
	crossed := 0
	for i := 0; i < reads && crossed == 0; i++ {
		upTo := l.LogEndOffset()
		slice, err := l.Slice(upTo-1, math.MaxInt64, upTo)
		if err != nil {
			t.Fatal(err)
		}
		if slice.Size != int64(len(raw)) {
			crossed++
			t.Errorf("read %d: Slice(%d, upTo %d) returned %d bytes, want the one %d-byte batch below upTo", i, upTo-1, upTo, slice.Size, len(raw))
		}
	}
	done.Store(true)
	wg.Wait()
}
