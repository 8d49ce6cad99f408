package netpoll

import (
	"bytes"
	"sync/atomic"
	"testing"
)

// exerciseWindow pipelines framesPerClient frames of frameBytes on each of clients
// connections against a handler that withholds answers. The test answers the oldest request
// only once limit requests are outstanding, so the server must stop decoding at the limit and
// resume when answers drain. It checks that the handler never sees more than limit, that the
// window did fill, and that every response arrives in order.
func exerciseWindow(t *testing.T, cfg Config, clients, framesPerClient, frameBytes, limit int) {
	t.Helper()
	var outstanding, maxOutstanding atomic.Int64
	pending := make(chan *pendingRequest, clients*framesPerClient)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		now := outstanding.Add(1)
		for seen := maxOutstanding.Load(); now > seen; seen = maxOutstanding.Load() {
			if maxOutstanding.CompareAndSwap(seen, now) {
				break
			}
		}
		pending <- &pendingRequest{frame: frame, res: res}
	}}
	server := startServer(t, cfg, handler)
	connections := make([]*testClient, clients)
	for c := range connections {
		connections[c] = dial(t, server)
		var pipeline []byte
		for i := range framesPerClient {
			payload := bytes.Repeat([]byte{byte(c)}, frameBytes)
			payload[0] = byte(i)
			pipeline = append(pipeline, frame(payload)...)
		}
		connections[c].write(pipeline)
	}

	answer := func(request *pendingRequest) {
		outstanding.Add(-1) // before Send: the next frame may be served as soon as it retires
		request.res.Send(Chunk{Bytes: request.frame})
	}
	var held []*pendingRequest
	for range clients * framesPerClient {
		held = append(held, <-pending)
		if len(held) == limit {
			select {
			case extra := <-pending:
				t.Fatalf("request %d served while %d were outstanding (limit %d)", extra.frame[0], limit, limit)
			default:
			}
			answer(held[0])
			held = held[1:]
		}
	}
	for _, request := range held {
		answer(request)
	}
	if got := maxOutstanding.Load(); got != int64(limit) {
		t.Fatalf("handler saw at most %d outstanding requests, want exactly the limit %d", got, limit)
	}
	for c, client := range connections {
		for i := range framesPerClient {
			got := client.mustReadFrame()
			if len(got) != frameBytes || got[0] != byte(i) || (frameBytes > 1 && got[1] != byte(c)) {
				t.Fatalf("client %d response %d out of order or corrupt", c, i)
			}
		}
	}
	await(t, "server budget released", func() bool { return server.InFlightBytes() == 0 })
}

func TestBackpressureMaxInFlightRequests(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxInFlightRequests = 4
	exerciseWindow(t, cfg, 1, 40, 8, 4)
}

func TestBackpressureMaxInFlightBytes(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxInFlightBytes = 3000
	exerciseWindow(t, cfg, 1, 20, 1000, 3)
}

func TestBackpressureServerBudgetAcrossConnections(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxFrameBytes = 1000
	cfg.MaxServerInFlightBytes = 3000
	exerciseWindow(t, cfg, 3, 10, 1000, 3)
}

func TestBufferedInputPastHardCapClosesConnection(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxInFlightRequests = 1
	cfg.MaxFrameBytes = 1024
	cfg.MaxInFlightBytes = 1024
	held := make(chan *Responder, 1)
	handler := &testHandler{serve: func(_ *Conn, _ []byte, res *Responder) { held <- res }}
	server := startServer(t, cfg, handler)
	client := dial(t, server)
	var flood []byte
	for range 10 {
		flood = append(flood, frame(make([]byte, 1000))...)
	}
	_, _ = client.conn.Write(flood)
	client.awaitClosed()
	res := <-held
	doneErr := make(chan error, 1)
	res.SendThen(func(err error) { doneErr <- err }, Chunk{Bytes: []byte("late")})
	if err := <-doneErr; err == nil {
		t.Fatal("response to a closed connection reported as written")
	}
	await(t, "server budget released", func() bool { return server.InFlightBytes() == 0 })
}
