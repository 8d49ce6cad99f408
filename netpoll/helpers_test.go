package netpoll

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// testHandler builds a Handler from closures; nil ones do nothing.
type testHandler struct {
	serve  func(conn *Conn, frame []byte, res *Responder)
	opened func(conn *Conn)
	closed func(conn *Conn)
}

func (h *testHandler) Serve(conn *Conn, frame []byte, res *Responder) { h.serve(conn, frame, res) }

func (h *testHandler) Opened(conn *Conn) {
	if h.opened != nil {
		h.opened(conn)
	}
}

func (h *testHandler) Closed(conn *Conn) {
	if h.closed != nil {
		h.closed(conn)
	}
}

func echoHandler() *testHandler {
	return &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		res.Send(Chunk{Bytes: frame})
	}}
}

// testConfig is a small, quick configuration on an ephemeral port.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Address = "127.0.0.1:0"
	cfg.EventLoops = 2
	cfg.MaxFrameBytes = 16 << 20
	cfg.MaxInFlightBytes = 16 << 20
	cfg.MaxServerInFlightBytes = 64 << 20
	cfg.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Metrics = metrics.NewSet()
	return cfg
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// startServer listens with cfg and closes the server when the test ends.
func startServer(t testing.TB, cfg Config, h Handler) *Server {
	t.Helper()
	server, err := Listen(cfg, h)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := server.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return server
}

// testClient is a blocking client speaking size-prefixed frames. Reads carry a generous
// deadline so a broken server fails the test instead of hanging it.
type testClient struct {
	t    testing.TB
	conn *net.TCPConn
	// stream carries the frames: conn, or a TLS session over it.
	stream net.Conn
	reader *bufio.Reader
}

func dial(t testing.TB, server *Server) *testClient {
	t.Helper()
	conn, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &testClient{t: t, conn: conn.(*net.TCPConn), stream: conn, reader: bufio.NewReaderSize(conn, 64<<10)}
}

func frame(payload []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	return append(out, payload...)
}

func (c *testClient) write(data []byte) {
	c.t.Helper()
	if _, err := c.stream.Write(data); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *testClient) send(payload []byte) { c.t.Helper(); c.write(frame(payload)) }

// readFrame reads one response frame.
func (c *testClient) readFrame() ([]byte, error) {
	_ = c.stream.SetReadDeadline(time.Now().Add(20 * time.Second))
	var header [4]byte
	if _, err := io.ReadFull(c.reader, header[:]); err != nil {
		return nil, err
	}
	payload := make([]byte, binary.BigEndian.Uint32(header[:]))
	if _, err := io.ReadFull(c.reader, payload); err != nil {
		return nil, err
	}
	return payload, nil
}

func (c *testClient) mustReadFrame() []byte {
	c.t.Helper()
	payload, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return payload
}

// awaitClosed reads until the server closes the connection; any frame is a failure.
func (c *testClient) awaitClosed() {
	c.t.Helper()
	payload, err := c.readFrame()
	if err == nil {
		c.t.Fatalf("expected the server to close the connection, got a %d-byte frame", len(payload))
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		c.t.Fatalf("server did not close the connection: %v", err)
	}
}

// await polls condition until it holds, failing the test after a generous bound.
func await(t testing.TB, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tempFile creates a file of size pseudo-random bytes.
func tempFile(t testing.TB, size int, seed byte) (*os.File, []byte) {
	t.Helper()
	content := make([]byte, size)
	state := uint32(seed) + 1
	for i := range content {
		state = state*1664525 + 1013904223
		content[i] = byte(state >> 24)
	}
	file, err := os.CreateTemp(t.TempDir(), "chunk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write(content); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = file.Close() })
	return file, content
}
