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
}

// Offsets returns the latest consumer offsets snapshot: one atomic load; the result must not be
// modified. An offsets change is visible here before CommitOffsets reports it done.
func (c *Coordinator) Offsets() *Offsets { return c.fsm.offsets.Load() }

// CommitOffsets stores commits through Raft, sharing one log entry with every other commit that
// arrives while the previous entry is in flight (up to Config.OffsetCommitBatch commits, after
// waiting at most Config.OffsetCommitLinger for company). done is called exactly once, on the
// batcher goroutine, with nil once the entry applied, or an error wrapping ErrNotLeader, ErrTimeout
// or ErrClosed; it must not block. CommitOffsets itself waits only while the queue is full.
func (c *Coordinator) CommitOffsets(commits []OffsetCommit, done func(error)) {
	if len(commits) == 0 {
		done(nil)
		return
	}
	c.offsetQueue.RLock()
	defer c.offsetQueue.RUnlock()
	if c.offsetQueue.closed {
		done(fmt.Errorf("%w: commit offsets", ErrClosed))
		return
	}
	select {
	case c.offsetCommits <- pendingCommit{commits: commits, done: done}:
	case <-c.stop:
		done(fmt.Errorf("%w: commit offsets", ErrClosed))
	}
}

// DeleteGroupOffsets drops every committed offset of the named groups.
func (c *Coordinator) DeleteGroupOffsets(ctx context.Context, groups []string) error {
	if err := c.checkLeader(ctx); err != nil {
		return err
	}
	_, err := c.propose(ctx, &deleteGroupOffsetsCommand{Groups: groups})
	return err
}

// DeletePartitionOffsets drops one group's committed offsets for the given partitions.
func (c *Coordinator) DeletePartitionOffsets(ctx context.Context, group string, partitions []TopicPartition) error {
	if err := c.checkLeader(ctx); err != nil {
		return err
	}
	_, err := c.propose(ctx, &deletePartitionOffsetsCommand{Group: group, Partitions: partitions})
	return err
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

func (c *Coordinator) proposeCommits(batch []pendingCommit, count int) {
	commits := make([]OffsetCommit, 0, count)
	for _, p := range batch {
		commits = append(commits, p.commits...)
	}
	var err error
	if !c.IsLeader() {
		err = fmt.Errorf("%w: the controller is node %d", ErrNotLeader, c.Metadata().ControllerID)
	} else {
		_, err = c.propose(context.Background(), &commitOffsetsCommand{Commits: commits})
	}
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
