package coordinator

// Read barriers: Raft's read index, for reads that must not go back in time.
//
// A node's state machine can lag the controller's without the node knowing: a process resumed after
// SIGSTOP, or one cut off from the controller, still serves its local copy (Offsets, GroupState,
// Metadata) and still believes what that copy says, e.g. that it coordinates a group whose offsets
// other nodes have since committed further. A read that must see every change acknowledged before
// it began (a consumer asking for its group's committed offsets) first passes a barrier:
//
//  1. this node asks the controller for a read index (opReadIndex, forwarded; or locally on the
//     controller);
//  2. the controller confirms with a quorum of voters that it still leads (raft VerifyLeader: a
//     stale leader learns of the newer term and fails), and answers its applied index, which covers
//     every change acknowledged to anyone (a change is acknowledged only once the controller
//     applied it);
//  3. this node waits until it has applied that index.
//
// After that the node's Metadata, Offsets and GroupState are at least as new as the read's start.
// A node that cannot complete the barrier (no controller reachable, the leader cannot confirm) gets
// an error wrapping ErrNotLeader or ErrTimeout, and the caller refuses the read so that the client
// retries, possibly elsewhere.
//
// Cost: concurrent readers share rounds. While a round is in flight, arriving readers queue; when
// it ends, one new round serves all of them. So a node pays one round trip to the controller (and
// the controller one heartbeat round) per batch of readers, never per reader. A reader never joins
// a round already in flight: its index may predate the reader's start.

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// readBarrierTimeout bounds one barrier round (and at most Config.ApplyTimeout): a node cut off
// from the controller refuses reads after it rather than holding the clients' connections.
const readBarrierTimeout = 3 * time.Second

// readBarrier batches ReadBarrier callers into rounds.
type readBarrier struct {
	mu struct {
		sync.Mutex
		waiting []func(error) // callers for the next round
		running bool          // a round goroutine runs
		closed  bool
	}
	rounds sync.WaitGroup // the round goroutine, awaited by Close
}

// ReadBarrier calls done once this node has applied every change the controller had applied when
// the barrier's round began, the controller having confirmed its leadership with a quorum of
// voters; or with an error wrapping ErrNotLeader (no controller could confirm), ErrTimeout or
// ErrClosed. done runs on the barrier goroutine (or at once, on the caller's, after Close) and must
// not block. See the comment at the top of read_barrier.go.
func (c *Coordinator) ReadBarrier(done func(error)) {
	b := &c.barrier
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		done(fmt.Errorf("%w: read barrier", ErrClosed))
		return
	}
	b.mu.waiting = append(b.mu.waiting, done)
	start := !b.mu.running
	if start {
		b.mu.running = true
		b.rounds.Add(1)
	}
	b.mu.Unlock()
	if start {
		go c.runReadBarrier()
	}
}

// WaitReadBarrier is ReadBarrier for callers that may block: it returns the barrier's result, or
// ErrTimeout when ctx ends first.
func (c *Coordinator) WaitReadBarrier(ctx context.Context) error {
	result := make(chan error, 1)
	c.ReadBarrier(func(err error) { result <- err })
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: read barrier: %w", ErrTimeout, ctx.Err())
	}
}

// runReadBarrier runs rounds while callers wait.
func (c *Coordinator) runReadBarrier() {
	b := &c.barrier
	defer b.rounds.Done()
	for {
		b.mu.Lock()
		batch := b.mu.waiting
		b.mu.waiting = nil
		if len(batch) == 0 {
			b.mu.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		err := c.readBarrierRound()
		c.metrics.readBarriers.Inc()
		if err != nil {
			c.metrics.readBarrierFailures.Inc()
		}
		for _, done := range batch {
			done(err)
		}
	}
}

// readBarrierRound is one barrier: a read index from the controller, then the local wait for it
// (callController does both).
func (c *Coordinator) readBarrierRound() error {
	ctx, cancel := context.WithTimeout(context.Background(), min(readBarrierTimeout, c.config.ApplyTimeout))
	defer cancel()
	if _, err := callController(c, ctx, opReadIndex, struct{}{}, c.readIndex); err != nil {
		return fmt.Errorf("coordinator: read barrier: %w", err)
	}
	return nil
}

// closeReadBarrier refuses new callers and waits for the round goroutine (Close has cancelled the
// calls it makes).
func (c *Coordinator) closeReadBarrier() {
	b := &c.barrier
	b.mu.Lock()
	b.mu.closed = true
	b.mu.Unlock()
	b.rounds.Wait()
}

// verifyLeadership confirms with a quorum of voters that this node still leads (Raft's
// VerifyLeader). A leader cut off from its followers, or one paused while another was elected,
// fails with ErrNotLeader.
func (c *Coordinator) verifyLeadership(ctx context.Context) error {
	future := c.raft.VerifyLeader()
	result := make(chan error, 1)
	go func() { result <- future.Error() }() // returns within Raft's leader lease at worst
	select {
	case err := <-result:
		if err != nil {
			return fmt.Errorf("coordinator: verify leadership: %w", mapRaftError(err))
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: verify leadership: %w", ErrTimeout, ctx.Err())
	}
}
