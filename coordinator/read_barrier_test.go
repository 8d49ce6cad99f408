package coordinator

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// cutProxy forwards TCP connections to a node's Raft listener until cut: then it drops every
// connection and refuses new ones (the others cannot reach the node; the node can still dial out).
type cutProxy struct {
	listener net.Listener
	target   string
	mu       sync.Mutex
	cut      bool
	conns    []net.Conn
	wait     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	p := &cutProxy{listener: listen(t, "127.0.0.1:0"), target: target}
	p.wait.Add(1)
	go p.accept()
	t.Cleanup(func() {
		p.listener.Close()
		p.setCut(true)
		p.wait.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	defer p.wait.Done()
	for {
		in, err := p.listener.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		p.mu.Lock()
		if err != nil || p.cut {
			p.mu.Unlock()
			in.Close()
			if out != nil {
				out.Close()
			}
			continue
		}
		p.conns = append(p.conns, in, out)
		p.wait.Add(2)
		p.mu.Unlock()
		pipe := func(to, from net.Conn) {
			defer p.wait.Done()
			io.Copy(to, from)
			to.Close()
			from.Close()
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// startClusterWithCutProxy starts three voters; the others reach node 3's Raft port only through
// the returned proxy.
func startClusterWithCutProxy(t *testing.T) (*testCluster, *cutProxy) {
	cluster := &testCluster{t: t, nodes: map[int32]*Coordinator{}, configs: map[int32]Config{}}
	listeners := map[int32]net.Listener{}
	var proxy *cutProxy
	for id := int32(1); id <= 3; id++ {
		listeners[id] = listen(t, "127.0.0.1:0")
		address := listeners[id].Addr().String()
		if id == 3 {
			proxy = newCutProxy(t, address)
			address = proxy.listener.Addr().String()
		}
		cluster.voters = append(cluster.voters, Voter{NodeID: id, RaftAddress: address})
	}
	var wait sync.WaitGroup
	errs := make(chan error, 3)
	for id, listener := range listeners {
		config := cluster.nodeConfig(id)
		config.Listener = listener
		wait.Add(1)
		go func() {
			defer wait.Done()
			errs <- cluster.open(config)
		}()
	}
	wait.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(cluster.closeAll)
	return cluster, proxy
}

func committedOffset(c *Coordinator) int64 {
	committed, ok := c.Offsets().Lookup("g", "t", 0)
	if !ok {
		return -1
	}
	return committed.Offset
}

// TestReadBarrierRefusesAStaleNode is the regression test for committed offsets read backwards (the
// chaos suite, seed 1796175259477990328): a node that no longer hears the controller keeps an old
// copy of the offsets. Its local read is stale; the barrier refuses instead of confirming it, and
// once the node hears the controller again the barrier passes and the read is fresh.
func TestReadBarrierRefusesAStaleNode(t *testing.T) {
	tc, proxy := startClusterWithCutProxy(t)
	registerAll(t, tc)
	stale := tc.node(3)
	if stale.IsLeader() {
		// Node 3 must be a follower: hand leadership to another voter.
		if err := stale.raft.LeadershipTransfer().Error(); err != nil {
			t.Fatal(err)
		}
	}
	controller := tc.controller()
	if controller.NodeID() == 3 {
		t.Fatal("node 3 still leads")
	}
	commitSync(t, controller, commitOf("g", "t", 0, 10))
	awaitCondition(t, "node 3 applies the first commit", func() bool { return committedOffset(stale) == 10 })

	proxy.setCut(true)
	commitSync(t, controller, commitOf("g", "t", 0, 20))
	if got := committedOffset(stale); got != 10 {
		t.Fatalf("node 3, cut off, reads offset %d: the test needs it stale at 10", got)
	}
	err := stale.WaitReadBarrier(testContext(t))
	if err == nil {
		t.Fatalf("the barrier passed on a node that has not applied the latest commit (it reads %d)", committedOffset(stale))
	}
	if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("barrier error %v, want ErrTimeout or ErrNotLeader", err)
	}

	proxy.setCut(false)
	awaitCondition(t, "the barrier passes once node 3 hears the controller", func() bool {
		return stale.WaitReadBarrier(testContext(t)) == nil
	})
	if got := committedOffset(stale); got != 20 {
		t.Fatalf("after the barrier node 3 reads %d, want 20", got)
	}
}

// TestReadBarrierBatchesReaders: many concurrent readers on a follower share a few rounds, each one
// forwarded read index on the controller.
func TestReadBarrierBatchesReaders(t *testing.T) {
	tc := startCluster(t, 3)
	controller, follower := tc.controller(), tc.follower()
	before := controller.servedCalls(opReadIndex)
	const readers = 500
	results := make(chan error, readers)
	for range readers {
		follower.ReadBarrier(func(err error) { results <- err })
	}
	for range readers {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	calls := controller.servedCalls(opReadIndex) - before
	if calls < 1 || calls > readers/10 {
		t.Fatalf("%d readers took %d read-index calls; rounds should serve many", readers, calls)
	}
	t.Logf("%d readers served by %d read-index calls", readers, calls)

	// On the controller itself the barrier is local: a quorum check, no forwarding.
	if err := controller.WaitReadBarrier(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// TestReadBarrierAfterClose answers at once with ErrClosed.
func TestReadBarrierAfterClose(t *testing.T) {
	tc := startCluster(t, 1)
	c := tc.node(1)
	tc.stop(1)
	done := make(chan error, 1)
	c.ReadBarrier(func(err error) { done <- err })
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("barrier after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("barrier after Close never answered")
	}
}
