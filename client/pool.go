package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// connRole separates traffic that must not queue behind other traffic: responses come back in
// request order per connection, so a fetch held for its max wait would delay produce answers.
type connRole uint8

const (
	roleAdmin   connRole = iota // metadata and admin requests
	roleProduce                 // produce requests
	roleFetch                   // fetch requests
)

type connKey struct {
	nodeID int32
	role   connRole
}

// brokerPool holds at most one live connection per (broker, role) and redials failed ones on
// demand. Seed brokers, whose node ids are unknown until metadata names them, get ids -1, -2, ...
//
// Locks: brokerPool.mu is never held while a poolEntry.mu is taken. Entries are looked up under mu and
// dialled under their own mu, so a slow dial blocks only callers of the same connection.
type brokerPool struct {
	cfg *clientConfig

	mu struct {
		sync.Mutex
		entries   map[connKey]*poolEntry
		addresses map[int32]string // node id -> host:port, from metadata (and seeds)
		closed    bool
	}
}

type poolEntry struct {
	mu   sync.Mutex
	conn *brokerConn // guarded by mu; nil or possibly failed
}

func newBrokerPool(cfg *clientConfig) *brokerPool {
	p := &brokerPool{cfg: cfg}
	p.mu.entries = make(map[connKey]*poolEntry)
	p.mu.addresses = make(map[int32]string)
	for i, seed := range cfg.seeds {
		p.mu.addresses[int32(-1-i)] = seed
	}
	return p
}

// setAddresses records the brokers metadata named.
func (p *brokerPool) setAddresses(addresses map[int32]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for node, address := range addresses {
		p.mu.addresses[node] = address
	}
}

// existing returns the live connection for key, or nil. It never dials.
func (p *brokerPool) existing(nodeID int32, role connRole) *brokerConn {
	p.mu.Lock()
	entry := p.mu.entries[connKey{nodeID, role}]
	p.mu.Unlock()
	if entry == nil || !entry.mu.TryLock() {
		return nil
	}
	defer entry.mu.Unlock()
	if entry.conn != nil && entry.conn.alive() {
		return entry.conn
	}
	return nil
}

// conn returns a live connection to nodeID for role, dialling if needed.
func (p *brokerPool) conn(ctx context.Context, nodeID int32, role connRole) (*brokerConn, error) {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	address, known := p.mu.addresses[nodeID]
	key := connKey{nodeID, role}
	entry := p.mu.entries[key]
	if entry == nil {
		entry = &poolEntry{}
		p.mu.entries[key] = entry
	}
	p.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("client: broker %d is not in the metadata", nodeID)
	}

	entry.mu.Lock()
	defer entry.mu.Unlock()
	if entry.conn != nil && entry.conn.alive() && entry.conn.address == address {
		return entry.conn, nil
	}
	if entry.conn != nil {
		go entry.conn.shutdown()
	}
	conn, err := dialBroker(ctx, p.cfg, nodeID, address)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	closed := p.mu.closed
	p.mu.Unlock()
	if closed {
		conn.shutdown()
		return nil, ErrClosed
	}
	entry.conn = conn
	return conn, nil
}

// anyConn returns a connection for role to some broker: a known broker first (metadata-named ids
// ascending), then the seeds. It reports the last dial error if none answers.
func (p *brokerPool) anyConn(ctx context.Context, role connRole) (*brokerConn, error) {
	p.mu.Lock()
	nodes := make([]int32, 0, len(p.mu.addresses))
	for node := range p.mu.addresses {
		nodes = append(nodes, node)
	}
	p.mu.Unlock()
	// Known brokers (ids >= 0) first, then seeds in the order given (-1, -2, ...).
	sort.Slice(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if (a >= 0) != (b >= 0) {
			return a >= 0
		}
		if a >= 0 {
			return a < b
		}
		return a > b
	})
	for _, node := range nodes {
		if conn := p.existing(node, role); conn != nil {
			return conn, nil
		}
	}
	var errs []error
	for _, node := range nodes {
		conn, err := p.conn(ctx, node, role)
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no brokers known", ErrNetwork)
	}
	return nil, errors.Join(errs...)
}

// close shuts every connection and refuses new ones.
func (p *brokerPool) close() {
	p.mu.Lock()
	p.mu.closed = true
	entries := p.mu.entries
	p.mu.entries = map[connKey]*poolEntry{}
	p.mu.Unlock()
	for _, entry := range entries {
		entry.mu.Lock()
		if entry.conn != nil {
			entry.conn.shutdown()
		}
		entry.mu.Unlock()
	}
}
