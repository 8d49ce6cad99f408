package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/brokertest"
	"github.com/sluice-mq/sluice/client"
)

// TestProduceRightAfterTopicCreatedElsewhere: in a cluster a topic created on the controller
// reaches the other brokers' metadata moments later, so a producer asking one of them at once is
// told UNKNOWN_TOPIC_OR_PARTITION; it asks again instead of failing with ErrUnknownTopic (as
// `sluice bench` did against a 3-node cluster with no consumer groups). A relay in front of the
// broker creates the topic right after the broker answered the first Metadata request naming it
// and before the client reads that answer, so the client's first answer always says unknown.
func TestProduceRightAfterTopicCreatedElsewhere(t *testing.T) {
	const topic = "created-meanwhile"
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The broker advertises the relay, so that every connection of the client goes through it.
	broker := brokertest.Start(t, func(cfg *broker.Config) { cfg.Advertise = listener.Addr().String() })
	admin := newClient(t, broker.Addr().String())
	relay := startCreatingRelay(t, listener, broker.Addr().String(), topic, func() { createTopic(t, admin, topic, 1) })

	c := newClient(t, relay.addr)
	p := newProducer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &client.Record{Topic: topic, Value: []byte("first")}); err != nil {
		t.Fatalf("produce right after the topic was created: %v", err)
	}
	if !relay.created() {
		t.Fatal("the relay never saw a Metadata request naming the topic: the test proved nothing")
	}
}

// creatingRelay forwards connections to a broker; when the broker answers the first Metadata
// request that names topic, it runs create before passing the answer on.
type creatingRelay struct {
	addr  string
	topic []byte
	run   func()
	fired atomic.Bool
	done  atomic.Bool
}

func startCreatingRelay(t *testing.T, listener net.Listener, target, topic string, create func()) *creatingRelay {
	t.Helper()
	r := &creatingRelay{addr: listener.Addr().String(), topic: []byte(topic), run: create}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		listener.Close()
		mu.Lock()
		for _, conn := range open {
			conn.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			in, err := listener.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			open = append(open, in, out)
			mu.Unlock()
			conns.Add(2)
			watched := make(chan int32, 1) // correlation id of the request naming the topic
			go func() {
				defer conns.Done()
				defer out.Close()
				r.forward(out, in, func(frame []byte) {
					const metadataKey = 3
					if len(frame) >= 8 && binary.BigEndian.Uint16(frame) == metadataKey && bytes.Contains(frame, r.topic) {
						select {
						case watched <- int32(binary.BigEndian.Uint32(frame[4:8])):
						default:
						}
					}
				})
			}()
			go func() {
				defer conns.Done()
				defer in.Close()
				var want int32 = -1
				r.forward(in, out, func(frame []byte) {
					if want < 0 {
						select {
						case want = <-watched:
						default:
						}
					}
					if want >= 0 && len(frame) >= 4 && int32(binary.BigEndian.Uint32(frame[:4])) == want {
						if r.fired.CompareAndSwap(false, true) {
							r.run()
							r.done.Store(true)
						}
					}
				})
			}()
		}
	}()
	return r
}

// forward copies size-prefixed frames from src to dst, calling seen with each frame (without its
// size) before passing it on.
func (r *creatingRelay) forward(dst io.Writer, src io.Reader, seen func([]byte)) {
	for {
		var size [4]byte
		if _, err := io.ReadFull(src, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(src, frame); err != nil {
			return
		}
		seen(frame)
		if _, err := dst.Write(append(size[:], frame...)); err != nil {
			return
		}
	}
}

func (r *creatingRelay) created() bool { return r.done.Load() }
