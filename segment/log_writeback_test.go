package segment

import (
	"context"
	"testing"
	"time"
)

// writtenBackMark reads where the flusher's last writeback or fsync ended.
func writtenBackMark(l *Log) writebackMark {
	l.flush.mu.Lock()
	defer l.flush.mu.Unlock()
	return l.flush.mu.writtenBack
}

// droppedMark reads where the flusher's last drop of cached pages ended (log_cache.go).
func droppedMark(l *Log) writebackMark {
	l.flush.mu.Lock()
	defer l.flush.mu.Unlock()
	return l.flush.mu.dropped
}

// awaitWrittenBack waits until the flusher has started writeback of the active segment up to at
// least position.
func awaitWrittenBack(t *testing.T, l *Log, position int64) {
	t.Helper()
	awaitMark(t, l, "writeback", writtenBackMark, position)
}

// awaitMark waits until mark (what: its name) is in the active segment at position or beyond.
func awaitMark(t *testing.T, l *Log, what string, mark func(*Log) writebackMark, position int64) {
	t.Helper()
	ticker := time.NewTicker(time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(10 * time.Second)
	for {
		m := mark(l)
		if m.segment == l.activeSegment() && m.position >= position {
			return
		}
		select {
		case <-ticker.C:
		case <-deadline:
			t.Fatalf("%s reached %d of the active segment, want %d", what, m.position, position)
		}
	}
}

// Under FlushByOS the log starts the kernel's writeback every WritebackBytes of appends, without
// an fsync: the kernel's own writeback would otherwise start only at gigabytes of dirty pages and
// stall appends while it writes them all.
func TestWritebackFollowsAppendsUnderFlushByOS(t *testing.T) {
	cfg := smallConfig()
	cfg.Flush = FlushByOS
	cfg.WritebackBytes = 4096
	var fsyncs int
	cfg.ObserveFsync = func(time.Duration) { fsyncs++ }
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()

	for i := 0; i < 20; i++ {
		if _, err := l.Append(testBatch(t, "a", 4, 200), 0); err != nil {
			t.Fatal(err)
		}
	}
	size := l.activeSegment().size()
	if size < 3*cfg.WritebackBytes {
		t.Fatalf("appended only %d bytes", size)
	}
	// Every full WritebackBytes asked for one; the last request covers all but under WritebackBytes.
	awaitWrittenBack(t, l, size-cfg.WritebackBytes)
	if fsyncs != 0 {
		t.Fatalf("writeback ran %d fsyncs, want none", fsyncs)
	}

	// An fsync covers what it synced: the next writeback starts after it.
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if mark := writtenBackMark(l); mark.position != l.activeSegment().size() {
		t.Fatalf("after an fsync writeback is marked at %d, want the synced end %d", mark.position, l.activeSegment().size())
	}
}

// WritebackBytes 0, or another flush policy (whose fsyncs bound the dirty pages), asks for none.
func TestWritebackOffAsksForNone(t *testing.T) {
	for _, tc := range []struct {
		name           string
		flush          FlushPolicy
		writebackBytes int64
	}{
		{"os, zero bytes", FlushByOS, 0},
		{"interval", FlushOnInterval, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.Flush = tc.flush
			cfg.FlushInterval = time.Hour
			cfg.WritebackBytes = tc.writebackBytes
			l := openLog(t, t.TempDir(), cfg)
			defer l.Close()
			for i := 0; i < 20; i++ {
				if _, err := l.Append(testBatch(t, "a", 4, 200), 0); err != nil {
					t.Fatal(err)
				}
			}
			// noteAppended runs inside Append: a request would be counted or queued by now.
			l.appendMu.Lock()
			counted := l.unwrittenBytes
			l.appendMu.Unlock()
			if counted != 0 || len(l.flush.writeback) != 0 {
				t.Fatalf("counted %d bytes, %d writeback requests queued; want none", counted, len(l.flush.writeback))
			}
			if mark := writtenBackMark(l); mark.segment != nil {
				t.Fatalf("writeback marked at %d, want none", mark.position)
			}
		})
	}
}

func TestConfigRejectsNegativeWritebackBytes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WritebackBytes = -1
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative WritebackBytes accepted")
	}
}
