package segment

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// flusher is the log's group commit: one goroutine that fdatasyncs the active segment when asked
// (an append under FlushOnAppend, a waiter, or the interval timer). Every append that reached the page
// cache before an fdatasync started is covered by it, so concurrent appenders share one fsync.
type flusher struct {
	log  *Log
	wake chan struct{} // capacity 1: a pending request
	quit chan struct{}
	done chan struct{}
	// reconfigured tells the loop to re-read the policy (interval changes).
	reconfigured chan struct{}
	// writeback (capacity 1) asks for a writeback of what was appended since the last
	// (log_writeback.go).
	writeback chan struct{}
	// yield is runtime.Gosched, run before each flush under Config.FlushYield; tests count it.
	yield    func()
	stopOnce sync.Once

	mu struct {
		sync.Mutex
		// Invariant: flushed only grows, except when Truncate cuts the log below it.
		flushed int64
		// truncations counts Truncate calls. A flush that sampled the log before one may have
		// synced bytes that were then cut and rewritten, so it must not advance flushed.
		truncations    uint64
		waiters        []flushWaiter
		err            error
		lastCheckpoint time.Time
		// writtenBack is where the last writeback, or the last fsync, ended (log_writeback.go).
		writtenBack     writebackMark
		writebackFailed bool // logged once
		// dropped is where the last drop of cached pages ended (log_cache.go).
		dropped    writebackMark
		dropFailed bool // logged once
	}
}

type flushWaiter struct {
	lastOffset int64
	notify     func(error)
}

func (f *flusher) start(l *Log, flushed int64) {
	f.log = l
	f.wake = make(chan struct{}, 1)
	f.quit = make(chan struct{})
	f.done = make(chan struct{})
	f.reconfigured = make(chan struct{}, 1)
	f.writeback = make(chan struct{}, 1)
	f.yield = runtime.Gosched
	f.mu.flushed = flushed
	go f.run()
}

func (f *flusher) run() {
	defer close(f.done)
	for {
		var tick <-chan time.Time
		var timer *time.Timer
		if cfg := f.log.config.Load(); cfg.Flush == FlushOnInterval {
			timer = time.NewTimer(cfg.FlushInterval)
			tick = timer.C
		}
		flush, writeback := true, false
		select {
		case <-f.quit:
			flush = false
		case <-f.reconfigured:
			flush = false
		case <-f.writeback:
			flush, writeback = false, true
		case <-f.wake:
		case <-tick:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-f.quit:
			return
		default:
		}
		if flush {
			f.flushOnce()
		}
		if writeback {
			f.writebackOnce()
		}
	}
}

func (f *flusher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *flusher) reconfigure() {
	select {
	case f.reconfigured <- struct{}{}:
	default:
	}
}

func (f *flusher) stop() {
	f.stopOnce.Do(func() {
		close(f.quit)
		<-f.done
	})
}

// flushOnce fdatasyncs the active segment up to what was appended when it started.
func (f *flusher) flushOnce() {
	l := f.log
	if l.config.Load().FlushYield {
		f.yield()
	}
	l.appendMu.Lock()
	if l.closed.Load() {
		l.appendMu.Unlock()
		return
	}
	active := l.activeSegment()
	e := active.loadExtent()
	next, position := e.nextOffset, e.size
	truncations := f.truncationCount()
	l.appendMu.Unlock()

	if next <= f.flushedOffset() {
		f.advanceSince(truncations, next) // wakes waiters that raced in below the flushed offset
		return
	}
	started := time.Now()
	err := injectedFsyncFault(l.config.Load())
	if err == nil {
		err = active.sync()
	}
	if err != nil {
		l.fail(err)
		f.failWaiters(fmt.Errorf("%w: %w", ErrFailed, err))
		return
	}
	if observe := l.config.Load().ObserveFsync; observe != nil {
		observe(time.Since(started))
	}
	f.mu.Lock()
	f.mu.writtenBack = writebackMark{active, position} // nothing dirty below it
	f.mu.Unlock()
	advanced := f.advanceSince(truncations, next)
	f.dropBehind(active, position) // after the waiters: acks=all does not wait for it
	if !advanced {
		return // the recovery point it would write may lie beyond the truncated end
	}

	f.mu.Lock()
	due := time.Since(f.mu.lastCheckpoint) >= l.config.Load().CheckpointInterval
	if due {
		f.mu.lastCheckpoint = time.Now()
	}
	f.mu.Unlock()
	if due {
		// Index writes must be serialized with Append and Truncate (package index), and the
		// point is only worth writing while this segment is still the active, untruncated one.
		l.appendMu.Lock()
		if !l.closed.Load() && l.activeSegment() == active && f.truncationCount() == truncations {
			// Index entries are written before the recovery point that lets recovery trust them.
			active.offsets.Flush()
			timesErr := active.times.Flush()
			point := active.pointAtEnd()
			point.position, point.nextOffset = position, next
			if timesErr != nil {
				point.timeEntries = unknownTimeIndex // the file may lack entries the point would vouch for
			}
			l.writeRecoveryPoint(point, false)
		}
		l.appendMu.Unlock()
	}
}

// advance records that every offset below flushed is durable and notifies the waiters it covers.
// The caller holds appendMu, so no Truncate can intervene.
func (f *flusher) advance(flushed int64) { f.advanceSince(f.truncationCount(), flushed) }

// advanceSince is advance for a flush that sampled the log when truncations was current. If Truncate
// ran since, it advances nothing and asks for another flush (its waiters still need one).
func (f *flusher) advanceSince(truncations uint64, flushed int64) bool {
	f.mu.Lock()
	if f.mu.truncations != truncations {
		f.mu.Unlock()
		f.poke()
		return false
	}
	if flushed > f.mu.flushed {
		f.mu.flushed = flushed
	}
	flushed = f.mu.flushed
	var ready []flushWaiter
	kept := f.mu.waiters[:0]
	for _, w := range f.mu.waiters {
		if w.lastOffset < flushed {
			ready = append(ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	f.mu.waiters = kept
	f.mu.Unlock()
	for _, w := range ready {
		w.notify(nil)
	}
	return true
}

func (f *flusher) truncationCount() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.truncations
}

// lower moves the flushed offset down after a truncation.
func (f *flusher) lower(offset int64) {
	f.mu.Lock()
	f.mu.flushed = min(f.mu.flushed, offset)
	f.mu.truncations++
	f.mu.Unlock()
}

func (f *flusher) failWaiters(err error) {
	f.mu.Lock()
	if f.mu.err == nil {
		f.mu.err = err
	}
	waiters := f.mu.waiters
	f.mu.waiters = nil
	f.mu.Unlock()
	for _, w := range waiters {
		w.notify(err)
	}
}

func (f *flusher) flushedOffset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.flushed
}

// NotifyFlushed calls notify once every offset up to and including lastOffset is fdatasynced (at
// once, on this goroutine, if it already is; otherwise on the flusher's goroutine, which notify must
// not block). The log fsyncs for it whatever its flush policy. notify gets an error if the log fails
// or closes first.
func (l *Log) NotifyFlushed(lastOffset int64, notify func(error)) {
	f := &l.flush
	f.mu.Lock()
	if err := f.mu.err; err != nil {
		f.mu.Unlock()
		notify(err)
		return
	}
	if lastOffset < f.mu.flushed {
		f.mu.Unlock()
		notify(nil)
		return
	}
	f.mu.waiters = append(f.mu.waiters, flushWaiter{lastOffset: lastOffset, notify: notify})
	f.mu.Unlock()
	f.poke()
}

// WaitFlushed blocks until every offset up to and including lastOffset is fdatasynced.
func (l *Log) WaitFlushed(ctx context.Context, lastOffset int64) error {
	done := make(chan error, 1)
	l.NotifyFlushed(lastOffset, func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("segment: wait for offset %d to flush: %w", lastOffset, ctx.Err())
	}
}

// Sync fdatasyncs everything appended so far.
func (l *Log) Sync(ctx context.Context) error {
	end := l.LogEndOffset()
	if end == 0 {
		return nil
	}
	return l.WaitFlushed(ctx, end-1)
}
