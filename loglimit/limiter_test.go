package loglimit

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestLimiter(interval time.Duration, burst int) (*Limiter, *bytes.Buffer, *time.Time) {
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	l := New(logger, interval, burst)
	clock := time.Unix(1_000_000, 0)
	l.now = func() time.Time { return clock }
	return l, &out, &clock
}

func lines(out *bytes.Buffer) []string {
	text := strings.TrimSpace(out.String())
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

func TestBurstPerWindowThenCountOfSuppressed(t *testing.T) {
	l, out, clock := newTestLimiter(time.Minute, 3)
	for range 100 {
		l.Warn("bad frame", "remote", "x")
	}
	if got := lines(out); len(got) != 3 {
		t.Fatalf("first window passed %d lines, want 3:\n%s", len(got), out)
	}
	if l.Suppressed() != 97 {
		t.Fatalf("suppressed = %d, want 97", l.Suppressed())
	}
	*clock = clock.Add(59 * time.Second)
	l.Warn("bad frame")
	if got := lines(out); len(got) != 3 {
		t.Fatalf("a line passed before the window ended")
	}
	*clock = clock.Add(time.Second)
	l.Warn("bad frame", "remote", "y")
	got := lines(out)
	if len(got) != 4 || !strings.Contains(got[3], "suppressed=98") || !strings.Contains(got[3], "remote=y") {
		t.Fatalf("first line of the next window = %q, want remote=y and suppressed=98", got[len(got)-1])
	}
	l.Warn("bad frame")
	if got := lines(out); strings.Contains(got[len(got)-1], "suppressed") {
		t.Fatalf("count repeated on a later line: %q", got[len(got)-1])
	}
}

func TestDisabledLevelIsNotCounted(t *testing.T) {
	var out bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError})), time.Minute, 1)
	for range 10 {
		l.Warn("quiet")
	}
	if out.Len() != 0 || l.Suppressed() != 0 {
		t.Fatalf("disabled level produced output %q or counted %d", out.String(), l.Suppressed())
	}
}

func TestConcurrentCallersNeverPassMoreThanBurst(t *testing.T) {
	l, out, _ := newTestLimiter(time.Hour, 5)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				l.Error("flood")
			}
		})
	}
	wg.Wait()
	if got := lines(out); len(got) != 5 {
		t.Fatalf("passed %d lines, want 5", len(got))
	}
	if l.Suppressed() != 8*500-5 {
		t.Fatalf("suppressed = %d, want %d", l.Suppressed(), 8*500-5)
	}
}
