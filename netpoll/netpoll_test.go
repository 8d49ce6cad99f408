package netpoll

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestEchoRoundTrip(t *testing.T) {
	server := startServer(t, testConfig(t), echoHandler())
	client := dial(t, server)
	for _, payload := range [][]byte{[]byte("hello"), {}, bytes.Repeat([]byte{7}, 200_000)} {
		client.send(payload)
		if got := client.mustReadFrame(); !bytes.Equal(got, payload) {
			t.Fatalf("echo of %d bytes came back as %d bytes", len(payload), len(got))
		}
	}
}

func TestConnHooksAndContext(t *testing.T) {
	opened := make(chan *Conn, 1)
	closed := make(chan *Conn, 1)
	handler := &testHandler{
		opened: func(conn *Conn) {
			conn.SetContext("state")
			opened <- conn
		},
		serve: func(conn *Conn, _ []byte, res *Responder) {
			res.Send(Chunk{Bytes: []byte(conn.Context().(string))})
		},
		closed: func(conn *Conn) { closed <- conn },
	}
	server := startServer(t, testConfig(t), handler)
	client := dial(t, server)
	client.send([]byte("x"))
	if got := string(client.mustReadFrame()); got != "state" {
		t.Fatalf("context = %q", got)
	}
	conn := <-opened
	if conn.RemoteAddr().String() != client.conn.LocalAddr().String() || conn.ID() == 0 {
		t.Fatalf("conn remote %v id %d, client local %v", conn.RemoteAddr(), conn.ID(), client.conn.LocalAddr())
	}
	if conn.LocalAddr().String() != server.Addr().String() {
		t.Fatalf("conn local %v, server %v", conn.LocalAddr(), server.Addr())
	}
	_ = client.conn.Close()
	if got := <-closed; got != conn {
		t.Fatal("Closed saw a different connection")
	}
}

func TestResponsesInRequestOrderWhenCompletedOutOfOrder(t *testing.T) {
	const requests = 200
	cfg := testConfig(t)
	cfg.MaxInFlightRequests = requests
	pending := make(chan *pendingRequest, requests)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		pending <- &pendingRequest{frame: frame, res: res}
	}}
	server := startServer(t, cfg, handler)
	client := dial(t, server)

	var pipeline []byte
	for i := range requests {
		pipeline = append(pipeline, frame(fmt.Appendf(nil, "request-%03d", i))...)
	}
	client.write(pipeline)

	collected := make([]*pendingRequest, 0, requests)
	for range requests {
		collected = append(collected, <-pending)
	}
	random := rand.New(rand.NewPCG(1, 2))
	random.Shuffle(len(collected), func(i, j int) { collected[i], collected[j] = collected[j], collected[i] })
	var completers sync.WaitGroup
	for _, request := range collected {
		completers.Add(1)
		go func() {
			defer completers.Done()
			request.res.Send(Chunk{Bytes: []byte("response-")}, Chunk{Bytes: request.frame[len("request-"):]})
		}()
	}
	completers.Wait()

	for i := range requests {
		if got, want := string(client.mustReadFrame()), fmt.Sprintf("response-%03d", i); got != want {
			t.Fatalf("response %d = %q, want %q", i, got, want)
		}
	}
}

type pendingRequest struct {
	frame []byte
	res   *Responder
}

func TestSkippedRequestsWriteNothing(t *testing.T) {
	const requests = 50
	pending := make(chan *pendingRequest, requests)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		pending <- &pendingRequest{frame: frame, res: res}
	}}
	server := startServer(t, testConfig(t), handler)
	client := dial(t, server)
	for i := range requests {
		client.send([]byte{byte(i)})
	}
	collected := make([]*pendingRequest, 0, requests)
	for range requests {
		collected = append(collected, <-pending)
	}
	// Complete from the back so skipped slots sit ahead of finished responses.
	for i := requests - 1; i >= 0; i-- {
		if i%3 == 0 {
			collected[i].res.Skip()
		} else {
			collected[i].res.Send(Chunk{Bytes: collected[i].frame})
		}
	}
	for i := range requests {
		if i%3 == 0 {
			continue
		}
		if got := client.mustReadFrame(); len(got) != 1 || got[0] != byte(i) {
			t.Fatalf("expected response %d, got %v", i, got)
		}
	}
	await(t, "budget released", func() bool { return server.InFlightBytes() == 0 })
}

func TestOversizedFrameClosesOnlyThatConnection(t *testing.T) {
	cfg := testConfig(t)
	server := startServer(t, cfg, echoHandler())
	healthy := dial(t, server)
	healthy.send([]byte("before"))
	healthy.mustReadFrame()

	for _, size := range []uint32{1 << 31 /* 2 GiB: negative as int32 */, uint32(cfg.MaxFrameBytes) + 1, 0xffffffff} {
		bad := dial(t, server)
		bad.write(binary.BigEndian.AppendUint32(nil, size))
		bad.awaitClosed()
	}
	if got := cfg.Metrics.GetOrCreateCounter("sluice_net_frames_rejected_total").Get(); got != 3 {
		t.Fatalf("frames rejected = %d, want 3", got)
	}
	healthy.send([]byte("after"))
	if got := string(healthy.mustReadFrame()); got != "after" {
		t.Fatalf("healthy connection got %q", got)
	}
}

func TestTruncatedFrameWaitsForTheRest(t *testing.T) {
	server := startServer(t, testConfig(t), echoHandler())
	client := dial(t, server)
	whole := frame([]byte("0123456789"))
	for _, cut := range []int{1, 3, 4, 9} {
		client.write(whole[:cut])
		client.write(whole[cut:])
		if got := string(client.mustReadFrame()); got != "0123456789" {
			t.Fatalf("cut at %d: got %q", cut, got)
		}
	}
}

func TestGarbageNeverPanicsAndOthersKeepWorking(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxFrameBytes = 1 << 10
	cfg.MaxInFlightBytes = 1 << 10
	server := startServer(t, cfg, echoHandler())
	healthy := dial(t, server)
	random := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		garbage := make([]byte, random.IntN(4096))
		for i := range garbage {
			garbage[i] = byte(random.Uint32())
		}
		bad := dial(t, server)
		_, _ = bad.conn.Write(garbage)
		_ = bad.conn.CloseWrite()
		// Whatever happens (frames echoed, connection closed), it must end.
		for {
			if _, err := bad.readFrame(); err != nil {
				break
			}
		}
	}
	healthy.send([]byte("still here"))
	if got := string(healthy.mustReadFrame()); got != "still here" {
		t.Fatalf("healthy connection got %q", got)
	}
}

func TestGracefulCloseWaitsForInFlight(t *testing.T) {
	served := make(chan *Responder, 1)
	handler := &testHandler{serve: func(_ *Conn, _ []byte, res *Responder) { served <- res }}
	server, err := Listen(testConfig(t), handler)
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, server)
	client.send([]byte("slow"))
	res := <-served

	closeResult := make(chan error, 1)
	go func() { closeResult <- server.Close(context.Background()) }()
	await(t, "close to begin", server.closing.Load)
	select {
	case err := <-closeResult:
		t.Fatalf("Close returned %v before the in-flight response was written", err)
	default:
	}
	res.Send(Chunk{Bytes: []byte("done")})
	if got := string(client.mustReadFrame()); got != "done" {
		t.Fatalf("got %q", got)
	}
	if err := <-closeResult; err != nil {
		t.Fatalf("Close: %v", err)
	}
	client.awaitClosed()
}

func TestCloseDeadlineAbandonsWithheldResponses(t *testing.T) {
	served := make(chan *Responder, 1)
	handler := &testHandler{serve: func(_ *Conn, _ []byte, res *Responder) { served <- res }}
	server, err := Listen(testConfig(t), handler)
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, server)
	client.send([]byte("never answered"))
	res := <-served

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := server.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	doneErr := make(chan error, 1)
	res.SendThen(func(err error) { doneErr <- err }, Chunk{Bytes: []byte("late")})
	if err := <-doneErr; !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("late send done = %v", err)
	}
	client.awaitClosed()
}

func TestTwoServersInOneProcess(t *testing.T) {
	first := startServer(t, testConfig(t), echoHandler())
	second, err := Listen(testConfig(t), echoHandler())
	if err != nil {
		t.Fatal(err)
	}
	if first.Addr().String() == second.Addr().String() {
		t.Fatalf("both servers on %v", first.Addr())
	}
	secondClient := dial(t, second)
	secondClient.send([]byte("b"))
	secondClient.mustReadFrame()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	firstClient := dial(t, first)
	firstClient.send([]byte("a"))
	if got := string(firstClient.mustReadFrame()); got != "a" {
		t.Fatalf("got %q", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	broken := func(change func(*Config)) {
		t.Helper()
		cfg := DefaultConfig()
		change(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate = %v, want ErrInvalidConfig", err)
		}
	}
	broken(func(c *Config) { c.Address = "nope" })
	broken(func(c *Config) { c.MaxFrameBytes = 0 })
	broken(func(c *Config) { c.MaxInFlightRequests = 0 })
	broken(func(c *Config) { c.MaxInFlightBytes = -1 })
	broken(func(c *Config) { c.MaxServerInFlightBytes = int64(c.MaxFrameBytes) - 1 })
	broken(func(c *Config) { c.EventLoops = -1 })
	broken(func(c *Config) { c.MaxBufferedOutboundBytes = 0 })
}

func TestConnCloseAfterResponsesWritten(t *testing.T) {
	handler := &testHandler{serve: func(conn *Conn, frame []byte, res *Responder) {
		go func() {
			res.Send(Chunk{Bytes: frame})
			if string(frame) == "bye" {
				conn.Close()
			}
		}()
	}}
	server := startServer(t, testConfig(t), handler)
	client := dial(t, server)
	client.send([]byte("hello"))
	client.send([]byte("bye"))
	for _, want := range []string{"hello", "bye"} {
		if got := string(client.mustReadFrame()); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	client.awaitClosed()
}

func TestCloseStopsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	server, err := Listen(testConfig(t), echoHandler())
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, server)
	client.send([]byte("x"))
	client.mustReadFrame()
	if err := server.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	await(t, "server goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestInvalidResponseClosesConnectionAfterEarlierOnes(t *testing.T) {
	secondPanicked := make(chan bool, 1)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		if string(frame) == "ok" {
			res.Send(Chunk{Bytes: frame})
			func() {
				defer func() { secondPanicked <- recover() != nil }()
				res.Skip()
			}()
			return
		}
		res.Send(Chunk{File: os.Stdin, FileLength: -1})
	}}
	server := startServer(t, testConfig(t), handler)
	client := dial(t, server)
	client.write(append(frame([]byte("ok")), frame([]byte("bad"))...))
	if got := string(client.mustReadFrame()); got != "ok" {
		t.Fatalf("got %q", got)
	}
	client.awaitClosed()
	if !<-secondPanicked {
		t.Fatal("answering a request twice did not panic")
	}
}
