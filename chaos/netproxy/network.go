package netproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Role is what kind of peer a link end is.
type Role int

const (
	Unknown Role = iota
	Node
	Client
)

// Peer is one end of a link: a node or a client, with its id (1-based).
type Peer struct {
	Role Role
	ID   int32
}

// NodePeer and ClientPeer name peers.
func NodePeer(id int32) Peer   { return Peer{Node, id} }
func ClientPeer(id int32) Peer { return Peer{Client, id} }

func (p Peer) String() string {
	switch p.Role {
	case Node:
		return fmt.Sprintf("n%d", p.ID)
	case Client:
		return fmt.Sprintf("c%d", p.ID)
	}
	return "unknown"
}

// Service is the listener a connection reached.
type Service int

const (
	Kafka Service = iota
	Raft
)

func (s Service) String() string {
	if s == Raft {
		return "raft"
	}
	return "kafka"
}

// Effect is what happens to bytes flowing one way on a link. The zero Effect forwards them.
type Effect struct {
	Blocked        bool
	Delay          time.Duration
	BytesPerSecond int64
}

// Policy decides the effect on bytes from -> to over a connection to service. It must be cheap and
// safe for concurrent use; the network calls it for every chunk.
type Policy func(from, to Peer, service Service) Effect

// Identify names the peer that dialed a connection, from its remote address and the address it
// dialed (the proxy's listener).
type Identify func(remote, local *net.TCPAddr) Peer

// Network is the set of proxies of one cluster and the policy they obey.
type Network struct {
	identify Identify

	mu struct {
		sync.Mutex
		policy  Policy
		changed chan struct{} // closed and replaced when the policy changes
		links   map[*link]struct{}
		proxies []*Proxy
		closed  bool
	}
	goroutines sync.WaitGroup
}

// New returns a network that attributes connections with identify and forwards everything until
// SetPolicy says otherwise.
func New(identify Identify) *Network {
	n := &Network{identify: identify}
	n.mu.changed = make(chan struct{})
	n.mu.links = map[*link]struct{}{}
	return n
}

// Proxy is one listener forwarding to one target.
type Proxy struct {
	network  *Network
	listener net.Listener
	to       Peer
	service  Service
	target   string
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// Listen starts a proxy on 127.0.0.1 (an ephemeral port) forwarding to target, the listener of
// service on node to.
func (n *Network) Listen(to Peer, service Service, target string) (*Proxy, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netproxy: listen: %w", err)
	}
	p := &Proxy{network: n, listener: listener, to: to, service: service, target: target}
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		listener.Close()
		return nil, errors.New("netproxy: network closed")
	}
	n.mu.proxies = append(n.mu.proxies, p)
	n.goroutines.Add(1)
	n.mu.Unlock()
	go p.accept()
	return p, nil
}

// SetPolicy replaces the policy (nil forwards everything) and wakes every held chunk to look again.
func (n *Network) SetPolicy(policy Policy) {
	n.mu.Lock()
	n.mu.policy = policy
	close(n.mu.changed)
	n.mu.changed = make(chan struct{})
	n.mu.Unlock()
}

// effect returns the current effect for from -> to and a channel closed at the next policy change.
func (n *Network) effect(from, to Peer, service Service) (Effect, <-chan struct{}) {
	n.mu.Lock()
	policy, changed := n.mu.policy, n.mu.changed
	n.mu.Unlock()
	if policy == nil {
		return Effect{}, changed
	}
	return policy(from, to, service), changed
}

// Drop resets every open connection for which match holds (from is the dialer, to the node
// behind the proxy), and returns how many it closed.
func (n *Network) Drop(match func(from, to Peer, service Service) bool) int {
	n.mu.Lock()
	var victims []*link
	for l := range n.mu.links {
		if match(l.from, l.to, l.service) {
			victims = append(victims, l)
		}
	}
	n.mu.Unlock()
	for _, l := range victims {
		l.closeWith(true)
	}
	return len(victims)
}

// Links counts the open connections per (from, to, service), for tests and reports.
func (n *Network) Links() map[[2]Peer]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[[2]Peer]int{}
	for l := range n.mu.links {
		out[[2]Peer{l.from, l.to}]++
	}
	return out
}

// Close stops every proxy, closes every connection and waits for all goroutines.
func (n *Network) Close() {
	n.mu.Lock()
	n.mu.closed = true
	proxies := n.mu.proxies
	links := make([]*link, 0, len(n.mu.links))
	for l := range n.mu.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	for _, p := range proxies {
		p.listener.Close()
	}
	for _, l := range links {
		l.close()
	}
	n.goroutines.Wait()
}

func (p *Proxy) accept() {
	defer p.network.goroutines.Done()
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return
		}
		n := p.network
		n.mu.Lock()
		if n.mu.closed {
			n.mu.Unlock()
			conn.Close()
			return
		}
		n.goroutines.Add(1)
		n.mu.Unlock()
		go p.connect(conn)
	}
}

// connect attributes an accepted connection, dials the target and starts forwarding.
func (p *Proxy) connect(inbound net.Conn) {
	n := p.network
	defer n.goroutines.Done()
	from := Peer{}
	remote, okRemote := inbound.RemoteAddr().(*net.TCPAddr)
	local, okLocal := inbound.LocalAddr().(*net.TCPAddr)
	if okRemote && okLocal && n.identify != nil {
		from = n.identify(remote, local)
	}
	outbound, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The node is down: reset the dialer's connection, the nearest a proxy can come to a
		// refused connect (a plain close reads as EOF, which clients take for a TLS mismatch).
		reset(inbound)
		return
	}
	if tcp, ok := outbound.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
	}
	l := &link{network: n, from: from, to: p.to, service: p.service, inbound: inbound, outbound: outbound, done: make(chan struct{})}
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		inbound.Close()
		outbound.Close()
		return
	}
	n.mu.links[l] = struct{}{}
	n.goroutines.Add(4)
	n.mu.Unlock()
	l.start()
}

// reset closes conn with an RST instead of a FIN.
func reset(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	conn.Close()
}
