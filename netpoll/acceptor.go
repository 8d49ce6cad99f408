package netpoll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// acceptor owns the Kafka listening socket and its accept loop; accepted connections are handed
// to gnet's event loops with Engine.Register.
//
// gnet's own accept loop ends the whole engine on the first accept error it does not expect,
// "too many open files" included, which left a broker running with no listener. This loop
// instead tells apart what passes from what does not:
//
//   - EMFILE/ENFILE (descriptors exhausted): a connection waits in the backlog that cannot be
//     accepted. The loop closes a descriptor it keeps in reserve for this, accepts and closes
//     the pending connections (the clients see the connection closed at once instead of hanging
//     in the backlog), reopens the reserve, and backs off.
//   - ENOBUFS/ENOMEM and other errors not known to be permanent: back off and retry.
//   - The listener itself broken (closed under us, EBADF, EINVAL, ENOTSOCK): the server is
//     marked failed (Server.Failed) and the loop ends; the process should exit.
//
// Back-off doubles from minAcceptBackoff to maxAcceptBackoff and resets on the next accepted
// connection. One goroutine per listener, owned by the Server, plus on TLS listeners the
// handshake goroutines it starts (tls.go): stop closes the listener, cancels the handshakes and
// waits for all of them.
type acceptor struct {
	server   *Server
	listener *boundListener
	socket   *net.TCPListener
	// spare is a descriptor on /dev/null held in reserve for shedding, -1 when none could be
	// opened. Touched only by the accept goroutine once it runs.
	spare    int
	stopping chan struct{}
	done     chan struct{}
	// handshakeContext ends when stop is called; handshakes counts the TLS handshake
	// goroutines, which stop waits for.
	handshakeContext context.Context
	cancelHandshakes context.CancelFunc
	handshakes       sync.WaitGroup
}

const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
	// maxShedPerPass bounds how many pending connections one shedding pass closes.
	maxShedPerPass = 128
)

// listenTCP binds address. Go's listeners set SO_REUSEADDR, so a restarted broker rebinds its
// port while connections of the previous process sit in TIME_WAIT.
func listenTCP(address string) (*net.TCPListener, error) {
	listener, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("netpoll: listen on %s: %w", address, err)
	}
	return listener.(*net.TCPListener), nil
}

func newAcceptor(server *Server, listener *boundListener, socket *net.TCPListener) *acceptor {
	a := &acceptor{
		server:   server,
		listener: listener,
		socket:   socket,
		spare:    openSpare(),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	a.handshakeContext, a.cancelHandshakes = context.WithCancel(context.Background())
	return a
}

func openSpare() int {
	descriptor, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return descriptor
}

func (a *acceptor) start() { go a.run() }

// closeSpare releases the reserve of an acceptor that never started.
func (a *acceptor) closeSpare() {
	if a.spare >= 0 {
		_ = unix.Close(a.spare)
		a.spare = -1
	}
}

// stop closes the listener and waits for the loop to end. Safe to call more than once.
func (a *acceptor) stop() {
	select {
	case <-a.stopping:
	default:
		close(a.stopping)
	}
	_ = a.socket.Close()
	a.cancelHandshakes()
	<-a.done
	a.handshakes.Wait()
}

func (a *acceptor) stopped() bool {
	select {
	case <-a.stopping:
		return true
	default:
		return false
	}
}

func (a *acceptor) run() {
	defer close(a.done)
	defer a.closeSpare()
	s := a.server
	var backoff time.Duration
	for {
		conn, err := a.socket.AcceptTCP()
		if err == nil && a.listener.config.isTLS() {
			if !a.startHandshake(conn) {
				return
			}
			backoff = 0
			continue
		}
		if err == nil {
			if a.register(conn, &pendingConn{listener: a.listener}) {
				backoff = 0
				continue
			}
			// Descriptors ran out while registering (gnet duplicates the socket): back off.
			backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
			if !a.sleep(backoff) {
				return
			}
			continue
		}
		if a.stopped() {
			return
		}
		switch {
		case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
			shed := a.shed()
			s.metrics.evicted(evictFileDescriptors).Add(shed)
			s.acceptLog.Error("netpoll: out of file descriptors: closing connections that cannot be accepted",
				"listen", a.listener.address, "shed", shed, "err", err)
		case errors.Is(err, net.ErrClosed), errors.Is(err, unix.EBADF), errors.Is(err, unix.EINVAL),
			errors.Is(err, unix.ENOTSOCK), errors.Is(err, unix.EOPNOTSUPP):
			s.fail(fmt.Errorf("netpoll: listener %s on %s failed: %w", a.listener.config.Name, a.listener.address, err))
			return
		default:
			s.acceptLog.Error("netpoll: accept failed; retrying", "listen", a.listener.address, "err", err)
		}
		backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
		if !a.sleep(backoff) {
			return
		}
	}
}

// sleep waits d or until stop; it reports false on stop.
func (a *acceptor) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-a.stopping:
		return false
	case <-timer.C:
		return true
	}
}

// shed frees the reserved descriptor, accepts and closes the pending connections, and takes
// the reserve back. It returns the number of connections closed.
func (a *acceptor) shed() int {
	if a.spare < 0 {
		a.spare = openSpare()
		return 0 // nothing in reserve: only back off
	}
	_ = unix.Close(a.spare)
	a.spare = -1
	shed := 0
	raw, err := a.socket.SyscallConn()
	if err == nil {
		_ = raw.Control(func(listenerDescriptor uintptr) {
			for shed < maxShedPerPass {
				// The listener is non-blocking: EAGAIN ends the pass when the backlog is empty.
				descriptor, _, err := unix.Accept4(int(listenerDescriptor), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
				if err != nil {
					if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED) {
						continue
					}
					return
				}
				_ = unix.Close(descriptor)
				shed++
			}
		})
	}
	a.spare = openSpare()
	return shed
}

// startHandshake runs conn's TLS handshake on a goroutine once a handshake slot is free. It
// reports false when the acceptor stopped while waiting for a slot.
func (a *acceptor) startHandshake(conn *net.TCPConn) bool {
	s := a.server
	if a.overConnectionLimit(conn) {
		return true // no handshake for a connection that would be refused anyway
	}
	select {
	case s.handshakeSlots <- struct{}{}:
	case <-a.stopping:
		_ = conn.Close()
		return false
	}
	a.handshakes.Add(1)
	go func() {
		defer a.handshakes.Done()
		defer func() { <-s.handshakeSlots }()
		a.handshake(a.handshakeContext, conn)
	}()
	return true
}

// overConnectionLimit closes conn and reports true when MaxConnections are open.
func (a *acceptor) overConnectionLimit(conn *net.TCPConn) bool {
	s := a.server
	if limit := s.config.MaxConnections; limit > 0 && s.openConnections.Load() >= int64(limit) {
		s.metrics.evicted(evictMaxConnections).Inc() // counted before the client can see it
		_ = conn.Close()
		s.acceptLog.Warn("netpoll: closing new connection: max connections reached",
			"remote", conn.RemoteAddr(), "maxConnections", limit)
		return true
	}
	return false
}

// register hands conn to an event loop and waits until the loop has opened it, so the
// connection count is exact for the next accept and no registration is left in flight when
// the loop is stopped. It reports false when descriptors ran out.
func (a *acceptor) register(conn *net.TCPConn, pending *pendingConn) bool {
	s := a.server
	if a.overConnectionLimit(conn) {
		return true
	}
	results, err := s.engine.Register(gnet.NewNetConnContext(gnet.NewContext(context.Background(), pending), conn))
	if err != nil {
		_ = conn.Close()
		s.acceptLog.Warn("netpoll: cannot hand connection to an event loop", "remote", conn.RemoteAddr(), "err", err)
		return true
	}
	// gnet registers a duplicate of the descriptor and closes conn itself, on success and failure.
	var result gnet.RegisteredResult
	select {
	case result = <-results:
	case <-s.runDone: // the event loops stopped on their own; nobody will open it
		return true
	}
	switch {
	case result.Err == nil:
	case errors.Is(result.Err, unix.EMFILE), errors.Is(result.Err, unix.ENFILE):
		s.metrics.evicted(evictFileDescriptors).Inc()
		s.acceptLog.Error("netpoll: out of file descriptors: closing connections that cannot be accepted",
			"listen", a.listener.address, "remote", conn.RemoteAddr(), "err", result.Err)
		return false
	default:
		s.acceptLog.Warn("netpoll: cannot hand connection to an event loop", "remote", conn.RemoteAddr(), "err", result.Err)
	}
	return true
}
