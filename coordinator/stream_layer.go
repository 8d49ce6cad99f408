package coordinator

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The Raft port carries two kinds of connection, told apart by the first
// byte the dialer writes:
//
//	'R'  Raft's own RPCs (hashicorp/raft's NetworkTransport, msgpack)
//	'F'  forwarded calls to the controller (forward.go, JSON frames)
//
// so a node needs one address per peer and the controller's Raft address
// (which Raft tells every follower) is also where calls are forwarded.
const (
	connectionRaft    byte = 'R'
	connectionForward byte = 'F'
)

// TLS: with a server config, every accepted connection is a TLS session
// (tls.NewListener: the handshake runs on the connection's routing goroutine
// under tagTimeout, so a peer that never completes it holds nothing for
// longer), and with a dial config every connection this node opens is one
// (tls.Dialer, the handshake bounded by the dial timeout). The tag byte is
// the first byte inside the session. Connections here are one goroutine
// each (Raft's transport is built that way), so plain crypto/tls serves.

// tagTimeout bounds how long an accepted connection may take to send its
// tag byte.
const tagTimeout = 10 * time.Second

// streamLayer implements raft.StreamLayer on a listener shared with the
// forwarding server. It owns an accept goroutine and one goroutine per
// connection until that connection is handed to Raft or its forwarding
// session ends; Close stops and waits for all of them.
type streamLayer struct {
	listener  net.Listener
	advertise net.Addr
	dialTLS   *tls.Config // nil: plaintext dials
	// serve handles one forwarding connection until it ends or ctx is
	// cancelled; it must not close conn.
	serve func(ctx context.Context, conn net.Conn)

	raftConnections chan net.Conn // tagged 'R', waiting for Raft's Accept
	ctx             context.Context
	cancel          context.CancelFunc // called by Close
	goroutines      sync.WaitGroup

	mu struct {
		sync.Mutex
		// connections are the accepted connections not closed yet, Raft's
		// included; Close closes them all, so peers notice at once.
		connections map[net.Conn]struct{}
	}
}

// raftConnection is an accepted connection handed to Raft; closing it
// forgets it.
type raftConnection struct {
	net.Conn
	layer *streamLayer
	once  sync.Once
}

func (c *raftConnection) Close() error {
	var err error
	c.once.Do(func() {
		c.layer.untrack(c.Conn)
		err = c.Conn.Close()
	})
	return err
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// newStreamLayer starts accepting on listener. advertise (nil for the bound
// address) is what Addr reports; it must not be a wildcard address.
func newStreamLayer(listener net.Listener, advertise net.Addr, serve func(context.Context, net.Conn), serverTLS, dialTLS *tls.Config) (*streamLayer, error) {
	if advertise == nil {
		advertise = listener.Addr()
	}
	if (serverTLS == nil) != (dialTLS == nil) {
		return nil, fmt.Errorf("coordinator: raft TLS needs both a server and a dial config, or neither")
	}
	if serverTLS != nil {
		listener = tls.NewListener(listener, serverTLS)
	}
	if tcp, ok := advertise.(*net.TCPAddr); !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		return nil, fmt.Errorf("coordinator: raft address %v is not an address other nodes can dial; set the advertise address", advertise)
	}
	s := &streamLayer{
		listener:        listener,
		advertise:       advertise,
		dialTLS:         dialTLS,
		serve:           serve,
		raftConnections: make(chan net.Conn),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.connections = map[net.Conn]struct{}{}
	s.goroutines.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *streamLayer) acceptLoop() {
	defer s.goroutines.Done()
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			// A transient error (too many open files): back off briefly.
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
				continue
			}
		}
		if !s.track(conn) {
			conn.Close()
			return
		}
		s.goroutines.Add(1)
		go s.route(conn)
	}
}

// track adds conn to the owned connections unless the layer is closing.
func (s *streamLayer) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.mu.connections[conn] = struct{}{}
	return true
}

func (s *streamLayer) untrack(conn net.Conn) {
	s.mu.Lock()
	delete(s.mu.connections, conn)
	s.mu.Unlock()
}

// route reads a connection's tag and hands it on.
func (s *streamLayer) route(conn net.Conn) {
	defer s.goroutines.Done()
	var tag [1]byte
	conn.SetReadDeadline(time.Now().Add(tagTimeout))
	_, err := conn.Read(tag[:])
	conn.SetReadDeadline(time.Time{})
	switch {
	case err == nil && tag[0] == connectionRaft:
		select {
		case s.raftConnections <- &raftConnection{Conn: conn, layer: s}:
			return // Raft closes it
		case <-s.ctx.Done():
		}
	case err == nil && tag[0] == connectionForward:
		s.serve(s.ctx, conn)
	}
	s.untrack(conn)
	conn.Close()
}

// Accept returns the next Raft connection.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case conn := <-s.raftConnections:
		return conn, nil
	case <-s.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops accepting, closes every accepted connection (forwarding
// sessions end with them) and waits for its goroutines. Calling it again
// does nothing.
func (s *streamLayer) Close() error {
	s.mu.Lock()
	alreadyClosed := s.ctx.Err() != nil
	s.cancel()
	connections := make([]net.Conn, 0, len(s.mu.connections))
	for conn := range s.mu.connections {
		connections = append(connections, conn)
	}
	s.mu.Unlock()
	var err error
	if !alreadyClosed {
		err = s.listener.Close()
	}
	for _, conn := range connections {
		conn.Close()
	}
	s.goroutines.Wait()
	return err
}

// Addr is the advertised address.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial opens a Raft connection to address.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return dialTagged(context.Background(), string(address), timeout, s.dialTLS, connectionRaft)
}

// dialTagged connects to a Raft port (through TLS when tlsConfig is not nil)
// and writes the connection's tag.
func dialTagged(ctx context.Context, address string, timeout time.Duration, tlsConfig *tls.Config, tag byte) (net.Conn, error) {
	var conn net.Conn
	var err error
	if tlsConfig != nil {
		dialer := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: tlsConfig}
		conn, err = dialer.DialContext(ctx, "tcp", address)
	} else {
		dialer := net.Dialer{Timeout: timeout}
		conn, err = dialer.DialContext(ctx, "tcp", address)
	}
	if err != nil {
		return nil, err
	}
	conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte{tag}); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetWriteDeadline(time.Time{})
	return conn, nil
}
