package netpoll

import (
	"context"
	"testing"
	"time"
)

// TestRebindWithTimeWait: a server that closed connections first leaves them in TIME_WAIT on its
// port; a new server (a restarted broker) must still be able to listen on that port.
func TestRebindWithTimeWait(t *testing.T) {
	cfg := testConfig(t)
	handler := &testHandler{serve: func(conn *Conn, frame []byte, res *Responder) {
		res.Send(Chunk{Bytes: frame})
		conn.Close() // the server closes first: its side of the connection goes to TIME_WAIT
	}}
	first, err := Listen(cfg, handler)
	if err != nil {
		t.Fatal(err)
	}
	address := first.Addr().String()
	for i := 0; i < 3; i++ {
		c := dial(t, first)
		c.send([]byte("bye"))
		c.mustReadFrame()
		c.awaitClosed()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Address = address
	second := startServer(t, cfg, echoHandler())
	c := dial(t, second)
	c.send([]byte("again"))
	if got := string(c.mustReadFrame()); got != "again" {
		t.Fatalf("echo %q", got)
	}
}
