package broker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/netpoll"
)

// session is one client connection's queue of requests. Requests are handled one at a time, in
// arrival order, by a worker goroutine that exists only while the queue is non-empty.
type session struct {
	broker *Broker
	conn   *netpoll.Conn
	// closed is set once the connection closed (queued requests may still run).
	closed atomic.Bool
	// auth is the connection's SASL state and principal (session_auth.go).
	auth sessionAuth
	// parkedReplicaFetch is a follower's fetch waiting at this leader for data. Responses leave
	// in request order, so it would hold back every later response on the connection: the next
	// request answers it first (see replication's fetcher).
	parkedReplicaFetch atomic.Pointer[fetchState]
	// follower is the replica id + 1 of the follower fetching on this connection, 0 for clients;
	// set once, counted in Broker.followers.
	follower atomic.Int32

	mu struct {
		sync.Mutex
		queue   []queuedRequest
		running bool
	}
}

type queuedRequest struct {
	frame    []byte
	res      *netpoll.Responder
	received time.Time
}

// Opened implements netpoll.Handler.
func (b *Broker) Opened(conn *netpoll.Conn) {
	s := &session{broker: b, conn: conn}
	b.initSessionAuth(s)
	conn.SetContext(s)
}

// Closed implements netpoll.Handler. Queued requests still run; their responses are dropped.
// A closed connection ends its share sessions, releasing the records they hold.
func (b *Broker) Closed(conn *netpoll.Conn) {
	if s, ok := conn.Context().(*session); ok {
		s.closed.Store(true)
		if id := s.follower.Load(); id > 0 {
			b.followers.closed(id - 1)
		}
	}
	b.shares.connectionClosed(conn)
}

// Serve implements netpoll.Handler: it runs on the event loop and only queues.
func (b *Broker) Serve(conn *netpoll.Conn, frame []byte, res *netpoll.Responder) {
	s, ok := conn.Context().(*session)
	if !ok {
		s = &session{broker: b, conn: conn}
		b.initSessionAuth(s)
		conn.SetContext(s)
	}
	s.mu.Lock()
	s.mu.queue = append(s.mu.queue, queuedRequest{frame: frame, res: res, received: time.Now()})
	start := !s.mu.running
	s.mu.running = true
	s.mu.Unlock()
	if start {
		go s.drain()
	}
}

func (s *session) drain() {
	for {
		s.mu.Lock()
		if len(s.mu.queue) == 0 {
			s.mu.running = false
			s.mu.queue = nil
			s.mu.Unlock()
			return
		}
		next := s.mu.queue[0]
		s.mu.queue[0] = queuedRequest{}
		s.mu.queue = s.mu.queue[1:]
		s.mu.Unlock()
		if f := s.parkedReplicaFetch.Swap(nil); f != nil {
			f.expire()
		}
		s.broker.handle(s, next)
	}
}
