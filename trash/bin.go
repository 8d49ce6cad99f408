package trash

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// deletedInfix marks a directory that was moved aside to be removed.
const deletedInfix = ".deleted-"

// Config tunes how fast a Bin removes.
type Config struct {
	// Step is how many bytes one truncation frees (at least 4 KiB).
	Step int64
	// Pause separates two steps, leaving the journal to other writers.
	Pause time.Duration
}

// DefaultConfig frees 1 MiB per millisecond at most: about 3 GiB in 9 s on the test machine.
func DefaultConfig() Config { return Config{Step: 1 << 20, Pause: time.Millisecond} }

// Validate reports a Config a Bin cannot use.
func (c Config) Validate() error {
	var errs []error
	if c.Step < 4<<10 {
		errs = append(errs, fmt.Errorf("trash: step %d bytes under 4 KiB", c.Step))
	}
	if c.Pause < 0 {
		errs = append(errs, fmt.Errorf("trash: negative pause %v", c.Pause))
	}
	return errors.Join(errs...)
}

// Bin removes directories moved into it, in the background, one at a time.
type Bin struct {
	config Config
	logger *slog.Logger

	mu struct {
		sync.Mutex
		// queue holds directories already renamed aside, oldest first. It holds one name per
		// deleted partition, so it is bounded by the partitions a broker ever had.
		queue  []string
		closed bool
	}
	wake chan struct{} // capacity 1: queue grew
	stop chan struct{}
	done chan struct{}
}

// New starts a Bin's removal goroutine; Close stops it.
func New(config Config, logger *slog.Logger) (*Bin, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	b := &Bin{config: config, logger: logger, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b, nil
}

// Discard moves dir aside and queues it for removal. A dir that does not exist is no error.
func (b *Bin) Discard(dir string, now time.Time) error {
	aside := dir + deletedInfix + now.UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(dir, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("trash: move %s aside: %w", dir, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("trash: move %s aside: %w", dir, err)
	}
	b.enqueue(aside)
	return nil
}

// Sweep queues the directories in parent that an earlier run moved aside and did not finish
// removing.
func (b *Bin) Sweep(parent string) error {
	entries, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("trash: sweep %s: %w", parent, err)
	}
	for _, entry := range entries {
		if entry.IsDir() && strings.Contains(entry.Name(), deletedInfix) {
			b.enqueue(filepath.Join(parent, entry.Name()))
		}
	}
	return nil
}

// Pending is how many directories wait to be removed, the one being removed included.
func (b *Bin) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mu.queue)
}

// Close stops the removal between two steps and waits for it.
func (b *Bin) Close() {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return
	}
	b.mu.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
}

func (b *Bin) enqueue(dir string) {
	b.mu.Lock()
	b.mu.queue = append(b.mu.queue, dir)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *Bin) run() {
	defer close(b.done)
	for {
		b.mu.Lock()
		var dir string
		if len(b.mu.queue) > 0 {
			dir = b.mu.queue[0]
		}
		b.mu.Unlock()
		if dir == "" {
			select {
			case <-b.wake:
				continue
			case <-b.stop:
				return
			}
		}
		start := time.Now()
		freed, err := b.remove(dir)
		if errors.Is(err, errStopped) {
			return
		}
		if err != nil {
			b.logger.Error("remove deleted directory; left in place until the next start", "dir", dir, "err", err)
		} else {
			b.logger.Info("removed deleted directory", "dir", dir, "bytes", freed, "took", time.Since(start))
		}
		b.mu.Lock()
		b.mu.queue = b.mu.queue[1:]
		b.mu.Unlock()
	}
}

var errStopped = errors.New("trash: stopped")

// remove empties dir file by file, shrinking each in steps, then removes dir itself. It returns the
// bytes it freed.
func (b *Bin) remove(dir string) (int64, error) {
	var freed int64
	var files []string
	err := filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return freed, fmt.Errorf("trash: list %s: %w", dir, err)
	}
	for _, path := range files {
		n, err := b.shrink(path)
		freed += n
		if err != nil {
			return freed, err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return freed, fmt.Errorf("trash: remove %s: %w", dir, err)
	}
	return freed, nil
}

// shrink truncates path to nothing, Config.Step bytes at a time, then unlinks it.
func (b *Bin) shrink(path string) (int64, error) {
	file, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("trash: open %s: %w", path, err)
	}
	defer file.Close()
	freed, err := Shrink(file, b.config, b.stop)
	if err != nil {
		return freed, err
	}
	if err := os.Remove(path); err != nil {
		return freed, fmt.Errorf("trash: remove %s: %w", path, err)
	}
	return freed, nil
}

// Shrink truncates an open file down to its last config.Step bytes, a step at a time and
// config.Pause apart, so that closing or unlinking it afterwards frees little at once. It returns
// the bytes it freed; closing stop ends it between two steps. The caller closes the file.
func Shrink(file *os.File, config Config, stop <-chan struct{}) (int64, error) {
	info, err := file.Stat()
	if err != nil {
		return 0, fmt.Errorf("trash: stat %s: %w", file.Name(), err)
	}
	// Segment files are preallocated with fallocate's default mode, which moves the size along,
	// so the size covers every block the file holds.
	size := info.Size()
	pause := time.NewTimer(0)
	defer pause.Stop()
	for remaining := size; remaining > config.Step; {
		remaining -= config.Step
		if err := file.Truncate(remaining); err != nil {
			return size - remaining, fmt.Errorf("trash: truncate %s: %w", file.Name(), err)
		}
		pause.Reset(config.Pause)
		select {
		case <-stop:
			return size - remaining, errStopped
		case <-pause.C:
		}
	}
	return size, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if closeErr := d.Close(); err == nil {
		err = closeErr
	}
	return err
}
