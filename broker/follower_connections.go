package broker

import (
	"sync"
	"time"
)

// followerConnections counts each follower's open fetch connections to this broker, so that a
// follower whose last connection closed (killed, restarted, cut off) leaves the ISR of the
// partitions led here after replication.Config.DisconnectGrace instead of the whole lag time.
type followerConnections struct {
	mu     sync.Mutex
	byNode map[int32]int
	onGone func(node int32) // called, outside mu, when a node's count drops to zero
}

// opened counts a connection of node's (the first fetch with that replica id on it).
func (f *followerConnections) opened(node int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byNode == nil {
		f.byNode = map[int32]int{}
	}
	f.byNode[node]++
}

// closed uncounts one of node's connections.
func (f *followerConnections) closed(node int32) {
	f.mu.Lock()
	f.byNode[node]--
	gone := f.byNode[node] <= 0
	if gone {
		delete(f.byNode, node)
	}
	f.mu.Unlock()
	if gone {
		f.onGone(node)
	}
}

// followerGone marks node disconnected on every partition this broker leads.
func (b *Broker) followerGone(node int32) {
	now := time.Now()
	b.registry.forEach(func(p *partition) { p.replica.FollowerDisconnected(node, now) })
}
