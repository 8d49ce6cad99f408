package netpoll

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer collects log output from several event loops.
type lockedBuffer struct {
	mu     sync.Mutex
	buffer bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffer.Write(p)
}

func (b *lockedBuffer) count(substring string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buffer.String(), substring)
}

// Issue 9 item 6: one WARN line per malformed frame let a client flood the log. Many bad frames
// now cost a handful of lines, the last carrying the count of those dropped.
func TestMalformedFramesDoNotFloodTheLog(t *testing.T) {
	var logs lockedBuffer
	cfg := testConfig(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	server := startServer(t, cfg, echoHandler())

	const connections = 60
	for range connections {
		client := dial(t, server)
		client.write(binary.BigEndian.AppendUint32(nil, 0xffffffff)) // size -1
		client.awaitClosed()
	}
	rejected := cfg.Metrics.GetOrCreateCounter("sluice_net_frames_rejected_total").Get()
	if rejected != connections {
		t.Fatalf("frames rejected = %d, want %d", rejected, connections)
	}
	lines := logs.count("frame size out of range")
	if lines == 0 || lines > 10 {
		t.Fatalf("%d bad frames logged %d warning lines, want between 1 and 10", connections, lines)
	}
	// The server still serves a well-behaved client.
	client := dial(t, server)
	client.send([]byte("still here"))
	if got := client.mustReadFrame(); string(got) != "still here" {
		t.Fatalf("echo = %q", got)
	}
}
