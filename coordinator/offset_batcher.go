package coordinator

import (
	"context"
	"fmt"
	"time"
)

// offsetCommitQueueLength bounds the commit requests waiting for the batcher; a full queue makes
// CommitOffsets wait (backpressure on the committing connections).
const offsetCommitQueueLength = 1024

// pendingCommit is one caller's commits waiting for their Raft entry.
type pendingCommit struct {
	commits []OffsetCommit
	done    func(error)
	// forwarded marks commits another node forwarded here: they are proposed only while this node
	// is the controller, never forwarded again.
	forwarded bool
}

// Offsets returns the latest consumer offsets snapshot: one atomic load; the result must not be
// modified. An offsets change is visible here before CommitOffsets reports it done.
func (c *Coordinator) Offsets() *Offsets { return c.fsm.offsets.Load() }

// CommitOffsets stores commits through Raft, sharing one log entry with every other commit that
// arrives while the previous entry is in flight (up to Config.OffsetCommitBatch commits, after
// waiting at most Config.OffsetCommitLinger for company). On a node that is not the controller the
// batch goes to the controller in one forwarded call, where it joins the controller's own batch.
// done is called exactly once, on the batcher goroutine, with nil once the entry applied (on this
// node too), or an error wrapping ErrNotLeader, ErrTimeout or ErrClosed; it must not block.
// CommitOffsets itself waits only while the queue is full.
func (c *Coordinator) CommitOffsets(commits []OffsetCommit, done func(error)) {
	c.enqueueCommits(pendingCommit{commits: commits, done: done})
}

func (c *Coordinator) enqueueCommits(p pendingCommit) {
	if len(p.commits) == 0 {
		p.done(nil)
		return
	}
	c.offsetQueue.RLock()
	defer c.offsetQueue.RUnlock()
	if c.offsetQueue.closed {
		p.done(fmt.Errorf("%w: commit offsets", ErrClosed))
		return
	}
	select {
	case c.offsetCommits <- p:
	case <-c.stop:
		p.done(fmt.Errorf("%w: commit offsets", ErrClosed))
	}
}

// commitOffsetsOnController serves a batch forwarded by another node: it joins this controller's
// next batch.
func (c *Coordinator) commitOffsetsOnController(ctx context.Context, args commitOffsetsCommand) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	result := make(chan error, 1)
	c.enqueueCommits(pendingCommit{commits: args.Commits, forwarded: true, done: func(err error) { result <- err }})
	select {
	case err := <-result:
		return struct{}{}, err
	case <-ctx.Done():
		return struct{}{}, fmt.Errorf("%w: commit offsets: %w", ErrTimeout, ctx.Err())
	}
}

// proposeCommitBatch proposes one batch on the controller.
func (c *Coordinator) proposeCommitBatch(ctx context.Context, batch commitOffsetsCommand) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	_, err := c.propose(ctx, &batch)
	return struct{}{}, err
}

// DeleteGroupOffsets drops every committed offset of the named groups.
func (c *Coordinator) DeleteGroupOffsets(ctx context.Context, groups []string) error {
	_, err := callController(c, ctx, opDeleteGroupOffsets, groups, c.deleteGroupOffsets)
	return err
}

func (c *Coordinator) deleteGroupOffsets(ctx context.Context, groups []string) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	_, err := c.propose(ctx, &deleteGroupOffsetsCommand{Groups: groups})
	return struct{}{}, err
}

// DeletePartitionOffsets drops one group's committed offsets for the given partitions.
func (c *Coordinator) DeletePartitionOffsets(ctx context.Context, group string, partitions []TopicPartition) error {
	_, err := callController(c, ctx, opDeletePartitionOffsets, deletePartitionOffsetsCommand{Group: group, Partitions: partitions},
		c.deletePartitionOffsets)
	return err
}

func (c *Coordinator) deletePartitionOffsets(ctx context.Context, args deletePartitionOffsetsCommand) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	_, err := c.propose(ctx, &args)
	return struct{}{}, err
}

// runOffsetBatcher is the batcher goroutine: it gathers queued commits into one commit-offsets
// entry, proposes it and answers every caller in the batch. It exits when the Coordinator closes,
// answering what is still queued with ErrClosed.
func (c *Coordinator) runOffsetBatcher() {
	defer close(c.offsetBatcherDone)
	var linger *time.Timer
	for {
		var batch []pendingCommit
		count := 0
		select {
		case first := <-c.offsetCommits:
			batch, count = append(batch, first), len(first.commits)
		case <-c.stop:
			c.drainOffsetCommits()
			return
		}
		if c.config.OffsetCommitLinger > 0 {
			if linger == nil {
				linger = time.NewTimer(c.config.OffsetCommitLinger)
			} else {
				linger.Reset(c.config.OffsetCommitLinger)
			}
		}
	gather:
		for count < c.config.OffsetCommitBatch {
			if linger == nil {
				select {
				case next := <-c.offsetCommits:
					batch, count = append(batch, next), count+len(next.commits)
					continue
				default:
					break gather
				}
			}
			select {
			case next := <-c.offsetCommits:
				batch, count = append(batch, next), count+len(next.commits)
			case <-linger.C:
				break gather
			}
		}
		if linger != nil && !linger.Stop() {
			select {
			case <-linger.C:
			default:
			}
		}
		c.proposeCommits(batch, count)
	}
}

// proposeCommits proposes a batch, or forwards it to the controller in one call. Commits forwarded
// here by another node are refused (ErrNotLeader) when this node is no longer the controller: their
// sender retries with the new one.
func (c *Coordinator) proposeCommits(batch []pendingCommit, count int) {
	if !c.IsLeader() {
		notLeader := fmt.Errorf("%w: the controller is node %d", ErrNotLeader, c.Metadata().ControllerID)
		kept := batch[:0]
		for _, p := range batch {
			if p.forwarded {
				p.done(notLeader)
				count -= len(p.commits)
			} else {
				kept = append(kept, p)
			}
		}
		batch = kept
	}
	if len(batch) == 0 {
		return
	}
	commits := make([]OffsetCommit, 0, count)
	for _, p := range batch {
		commits = append(commits, p.commits...)
	}
	_, err := callController(c, context.Background(), opCommitOffsets, commitOffsetsCommand{Commits: commits}, c.proposeCommitBatch)
	for _, p := range batch {
		p.done(err)
	}
}

// drainOffsetCommits closes the queue to new callers (waiting for those sending now, who see stop)
// and answers what it holds.
func (c *Coordinator) drainOffsetCommits() {
	c.offsetQueue.Lock()
	c.offsetQueue.closed = true
	c.offsetQueue.Unlock()
	for {
		select {
		case p := <-c.offsetCommits:
			p.done(fmt.Errorf("%w: commit offsets", ErrClosed))
		default:
			return
		}
	}
}
