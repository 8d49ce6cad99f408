package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/segment"
)

// rawFile is a plain file taking the probe's appends, with a group commit of its own: one goroutine
// fdatasyncs whenever appends wait, and each fdatasync covers every append written before it
// started. It is what the disk gives a log, without the log.
type rawFile struct {
	file   *os.File
	result *outcome
	wake   chan struct{} // capacity 1: appends are waiting
	mu     sync.Mutex
	// Guarded by mu.
	written int64 // bytes written so far
	waiters []rawWaiter
	stopped bool // the appender is done: the syncer returns once nothing waits
}

type rawWaiter struct {
	end     int64 // durable once an fdatasync started at or after written reached it
	started time.Time
	bytes   int
}

// probeRaw is probe with plain files: each preallocated to cfg.SegmentBytes, as a segment may be,
// so that appends do not grow the file.
func probeRaw(root string, cfg segment.Config, files int, bytesPerSecond float64, batchBytes int, duration time.Duration) (*outcome, error) {
	interval := time.Duration(float64(time.Second) * float64(batchBytes) * float64(files) / bytesPerSecond)
	opened := make([]*rawFile, 0, files)
	var err error
	for i := range files {
		var file *os.File
		file, err = os.OpenFile(filepath.Join(root, fmt.Sprintf("raw-%d", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			break
		}
		opened = append(opened, &rawFile{file: file, result: &outcome{}, wake: make(chan struct{}, 1)})
		if err = unix.Fallocate(int(file.Fd()), 0, 0, cfg.SegmentBytes); err != nil {
			err = fmt.Errorf("diskprobe: preallocate %s: %w", file.Name(), err)
			break
		}
	}
	if err == nil {
		stop := time.Now().Add(duration)
		errs := make(chan error, 2*files)
		var wg sync.WaitGroup
		for _, f := range opened {
			wg.Go(func() { errs <- f.appendUntil(batchBytes, interval, stop) })
			wg.Go(func() { errs <- f.syncUntilStopped() })
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			err = errors.Join(err, e)
		}
	}
	results := make([]*outcome, 0, len(opened))
	for _, f := range opened {
		err = errors.Join(err, f.file.Close())
		results = append(results, f.result)
	}
	if err != nil {
		return nil, err
	}
	return merge(results), nil
}

// appendUntil writes one batch every interval until stop, each waiting for the syncer.
func (f *rawFile) appendUntil(batchBytes int, interval time.Duration, stop time.Time) error {
	defer func() {
		f.mu.Lock()
		f.stopped = true
		f.mu.Unlock()
		f.poke()
	}()
	data := probeBatch(batchBytes)
	next := time.Now()
	for time.Now().Before(stop) {
		started := time.Now()
		f.mu.Lock()
		at := f.written
		f.mu.Unlock()
		if _, err := f.file.WriteAt(data, at); err != nil {
			return fmt.Errorf("diskprobe: write %s: %w", f.file.Name(), err)
		}
		f.mu.Lock()
		f.written = at + int64(len(data))
		f.waiters = append(f.waiters, rawWaiter{end: f.written, started: started, bytes: len(data)})
		f.result.appends++
		f.mu.Unlock()
		f.poke()
		next = next.Add(interval)
		time.Sleep(time.Until(next))
	}
	return nil
}

func (f *rawFile) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// syncUntilStopped fdatasyncs for waiting appends until the appender has stopped and none waits.
func (f *rawFile) syncUntilStopped() error {
	for {
		<-f.wake
		f.mu.Lock()
		end, waiting, stopped := f.written, len(f.waiters), f.stopped
		f.mu.Unlock()
		if waiting == 0 {
			if stopped {
				return nil
			}
			continue
		}
		started := time.Now()
		if err := unix.Fdatasync(int(f.file.Fd())); err != nil {
			return fmt.Errorf("diskprobe: fdatasync %s: %w", f.file.Name(), err)
		}
		now := time.Now()
		f.mu.Lock()
		f.result.fsyncs = append(f.result.fsyncs, now.Sub(started))
		kept := f.waiters[:0]
		for _, w := range f.waiters {
			if w.end > end {
				kept = append(kept, w)
				continue
			}
			f.result.durable = append(f.result.durable, now.Sub(w.started))
			f.result.bytes += int64(w.bytes)
		}
		f.waiters = kept
		f.mu.Unlock()
		f.poke() // appends that came in during the fdatasync, or the appender's stop
	}
}
