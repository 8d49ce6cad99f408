package replication

// Catching up from behind the leader's log start.
//
// A follower that was away long enough can come back with a log that ends before its leader's log
// start: the leader deleted the offsets in between (retention, DeleteRecords) and answers every
// fetch at the follower's log end with OFFSET_OUT_OF_RANGE. Fetching can never close that gap, so
// the follower does what Kafka does ("truncate fully and start at the leader's log start offset"):
// it empties its log, restarts it at the leader's log start (segment.Log.ResetTo), clears its epoch
// history (the epochs of the records it dropped say nothing about what it will fetch; every batch
// fetched from now on brings its epoch again) and fetches from there.

import (
	"fmt"
	"time"
)

// ResetTo empties this follower's log and restarts it at offset, with an empty epoch history and a
// high watermark of offset. Only a follower resets: a leader's log is the partition's.
func (r *Replica) ResetTo(offset int64) error {
	r.appendGate.Lock()
	defer r.appendGate.Unlock()
	role, _, _ := r.State()
	if role != RoleFollower {
		return fmt.Errorf("replication: %s-%d: reset to %d as %s: %w", r.Topic, r.Partition, offset, role, notLeader(r))
	}
	// The history first: a crash between the two leaves an empty history over the old log, which
	// the next epoch check treats as a log with nothing to compare (and the reset happens again).
	if err := r.Epochs.TruncateTo(0); err != nil {
		return fmt.Errorf("replication: %s-%d: clear the epoch history: %w", r.Topic, r.Partition, err)
	}
	if err := r.Log.ResetTo(offset); err != nil {
		return fmt.Errorf("replication: %s-%d: reset the log to %d: %w", r.Topic, r.Partition, offset, err)
	}
	r.highWatermark.Store(offset)
	return nil
}

// resetBehindLeaderStart handles OFFSET_OUT_OF_RANGE for a follower whose log ends before the
// leader's log start: it resets the log there. It reports whether it did (the partition then
// fetches again at once).
func (f *fetcher) resetBehindLeaderStart(p *followed, leaderLogStart int64) bool {
	r := p.replica
	logEnd := r.Log.LogEndOffset()
	if leaderLogStart < 0 || logEnd >= leaderLogStart {
		return false
	}
	f.manager.logger.Warn("replication: follower's log ends before the leader's log start (the records between were deleted on the leader); restarting it empty at the leader's log start",
		"topic", r.Topic, "partition", r.Partition, "leader", f.leaderID, "log_start", r.Log.LogStartOffset(), "log_end", logEnd, "leader_log_start", leaderLogStart)
	if err := r.ResetTo(leaderLogStart); err != nil {
		f.manager.logger.Error("replication: reset a follower's log to the leader's log start", "topic", r.Topic, "partition", r.Partition, "err", err)
		p.pausedUntil = time.Now().Add(10 * f.manager.config.RetryBackoff)
		return true
	}
	f.manager.recovery.logResets.Inc()
	return true
}
