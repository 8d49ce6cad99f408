package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lockedLog collects the broker's log lines from many goroutines.
type lockedLog struct {
	mu     sync.Mutex
	buffer bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buffer.Write(p)
}

func (l *lockedLog) count(substring string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buffer.String(), substring)
}

// Issue 9 item 6: each request that closes its connection (unknown API key, unparsable header,
// malformed body) logged one WARN line, so a client could flood the log. Now a handful of lines
// pass per window, the later ones carrying the count of those dropped.
func TestBadRequestsDoNotFloodTheLog(t *testing.T) {
	var logs lockedLog
	b := startBroker(t, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	const connections = 60
	for i := range connections {
		c := dial(t, b)
		if i%2 == 0 {
			c.writeRaw(append(sizePrefix(8), rawHeader(9999, 0, 7)[:8]...)) // unknown key
		} else {
			c.writeRaw(append(sizePrefix(3), 0, 1, 2)) // shorter than a header
		}
		c.expectClosed()
	}
	lines := logs.count("closing connection")
	if lines == 0 || lines > 10 {
		t.Fatalf("%d bad requests logged %d warning lines, want between 1 and 10:\n%s", connections, lines, logs.text())
	}
	assertServing(t, b)
}

func (l *lockedLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buffer.String()
}
