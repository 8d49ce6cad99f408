package netpoll

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// chanNotifier passes ResponseDone's error to a channel.
type chanNotifier chan error

func (n chanNotifier) ResponseDone(err error) { n <- err }

// TestSendNotifyTellsTheNotifier: SendNotify's notifier hears nil once the response is written,
// and ErrConnectionClosed for a response sent after its connection closed.
func TestSendNotifyTellsTheNotifier(t *testing.T) {
	written := make(chanNotifier, 1)
	served := make(chan *Responder, 1)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		if string(frame) == "hold" {
			served <- res
			return
		}
		res.SendNotify(written, Chunk{Bytes: frame})
	}}
	server, err := Listen(testConfig(t), handler)
	if err != nil {
		t.Fatal(err)
	}
	client := dial(t, server)
	client.send([]byte("notify me"))
	if got := client.mustReadFrame(); !bytes.Equal(got, []byte("notify me")) {
		t.Fatalf("response %q", got)
	}
	if err := <-written; err != nil {
		t.Fatalf("notifier heard %v, want nil", err)
	}

	client.send([]byte("hold"))
	res := <-served
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := server.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	late := make(chanNotifier, 1)
	res.SendNotify(late, Chunk{Bytes: []byte("late")})
	if err := <-late; !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("late notifier heard %v, want ErrConnectionClosed", err)
	}
}
