package replication

// Where an acks=all produce's wait goes on the leader. The broker's produce stages end at "the
// in-sync replicas acknowledged"; this splits that wait by follower: how long after the append the
// last in-sync follower reported having fetched the batch (its fetch offset passed it), and how
// long until the last one reported it durable (its durable offset passed it; AckFsync only, as
// with AckMemory the two are the same report). A slow follower fetch and a slow follower fsync
// look alike in the produce stages and apart here.

import "time"

// AckWaitStage names a point in an acks=all produce's wait on its leader's followers.
type AckWaitStage int

const (
	// FollowersFetched: every in-sync follower had reported a fetch offset past the batch.
	FollowersFetched AckWaitStage = iota
	// FollowersDurable: every in-sync follower had reported a durable offset past the batch.
	FollowersDurable
)

func (s AckWaitStage) String() string {
	if s == FollowersDurable {
		return "followers_durable"
	}
	return "followers_fetched"
}

// ackWaitTimes is an ack waiter's record of its followers' reports. A report counts when it is the
// one that moved that follower's position past the waiter's last offset, so the latest such report
// is the last follower's.
type ackWaitTimes struct {
	registered  time.Time
	lastFetched time.Time // zero until an in-sync follower's fetch offset passed the batch
	lastDurable time.Time // zero until an in-sync follower's durable offset passed the batch
}

// noteFollowerLocked marks the waiters that an in-sync follower's report moved past: from
// before to after (positions are exclusive ends: offsets below them are fetched or durable).
func (r *Replica) noteFollowerLocked(before, after FollowerPosition, now time.Time) {
	if r.observeAckWait == nil {
		return
	}
	for i := range r.mu.waiters {
		w := &r.mu.waiters[i]
		if before.LogEnd <= w.lastOffset && w.lastOffset < after.LogEnd {
			w.times.lastFetched = now
		}
		if before.Durable <= w.lastOffset && w.lastOffset < after.Durable {
			w.times.lastDurable = now
		}
	}
}

// observeAnswered reports an answered waiter's follower stages. A waiter answered before any
// follower report (a leader alone in its ISR, or one failing) reports nothing for that stage.
func (r *Replica) observeAnswered(w *ackWaiter) {
	if r.observeAckWait == nil {
		return
	}
	if !w.times.lastFetched.IsZero() {
		r.observeAckWait(FollowersFetched, w.times.lastFetched.Sub(w.times.registered))
	}
	if r.ackMode == AckFsync && !w.times.lastDurable.IsZero() {
		r.observeAckWait(FollowersDurable, w.times.lastDurable.Sub(w.times.registered))
	}
}
