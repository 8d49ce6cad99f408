package replication

// Pure policy: the watermarks from replica positions, and which followers belong in the ISR. No I/O,
// no clock (times are passed in), no goroutines.

import (
	"slices"
	"time"
)

// FollowerPosition is what a leader knows of one follower.
type FollowerPosition struct {
	// LogEnd is the follower's log end offset (its last fetch offset); -1 until it fetched at
	// this epoch.
	LogEnd int64
	// Durable is the offset below which the follower's log is fsynced (its report); -1 unknown.
	// Invariant: Durable <= LogEnd.
	Durable int64
	// LastFetch is when its last fetch arrived; LastCaughtUp the last time it was known to have
	// everything the leader had (Kafka's lastCaughtUpTimeMs).
	LastFetch    time.Time
	LastCaughtUp time.Time
	// Disconnected is when the follower's last fetch connection to this leader closed, zero
	// while it has one or has fetched since.
	Disconnected time.Time
	// CopyFailed: the follower's last fetch said its copy failed (FailedCopyTag): it takes no
	// appends, so it leaves the ISR at once and may not rejoin while it says so.
	CopyFailed bool
	// leaderEndAtLastFetch is the leader's log end when the previous fetch arrived.
	leaderEndAtLastFetch int64
}

// inSync reports whether an ISR member stays in sync at now: caught up within lagMax, and not
// gone (connections closed) for longer than grace.
func (p FollowerPosition) inSync(now time.Time, lagMax, grace time.Duration) bool {
	if p.CopyFailed {
		return false
	}
	if !p.Disconnected.IsZero() && now.Sub(p.Disconnected) > grace {
		return false
	}
	return now.Sub(p.LastCaughtUp) <= lagMax
}

// fetched updates p for a fetch arriving at now, when the leader's log ends at leaderEnd: the
// follower is caught up now if it asks for the log end, and was caught up at its previous fetch if
// it now asks for what was the log end then. copyFailed is whether the fetch says the follower's
// copy failed.
func (p FollowerPosition) fetched(now time.Time, fetchOffset, durable, leaderEnd int64, copyFailed bool) FollowerPosition {
	p.CopyFailed = copyFailed
	if fetchOffset >= leaderEnd {
		p.LastCaughtUp = now
	} else if !p.LastFetch.IsZero() && fetchOffset >= p.leaderEndAtLastFetch && p.LastFetch.After(p.LastCaughtUp) {
		p.LastCaughtUp = p.LastFetch
	}
	p.LogEnd = fetchOffset
	p.Durable = min(durable, fetchOffset)
	p.LastFetch = now
	p.Disconnected = time.Time{}
	p.leaderEndAtLastFetch = leaderEnd
	return p
}

// watermarks computes the high and durable watermarks over the members of isr (the leader
// included, with its log end and flushed offset). Members without a known position hold both at
// their previous values, and neither ever goes below its previous value.
func watermarks(leaderID int32, leaderEnd, leaderFlushed int64, isr []int32, followers map[int32]FollowerPosition,
	previousHigh, previousDurable int64) (high, durable int64) {
	high, durable = leaderEnd, min(leaderFlushed, leaderEnd)
	for _, id := range isr {
		if id == leaderID {
			continue
		}
		position, ok := followers[id]
		if !ok || position.LogEnd < 0 {
			high, durable = min(high, previousHigh), min(durable, previousDurable)
			continue
		}
		high = min(high, position.LogEnd)
		durable = min(durable, max(position.Durable, 0))
	}
	return max(high, previousHigh), max(min(durable, high), previousDurable)
}

// desiredISR is the ISR the leader should propose: members other than the leader that have not
// been caught up within lagMax, whose connections closed more than grace ago, or whose copy failed,
// leave; replicas outside it that have reached the high watermark and the start of the leader's
// epoch, fetched within lagMax and have a working copy, join. The result keeps replica order.
func desiredISR(now time.Time, lagMax, grace time.Duration, leaderID int32, replicas, isr []int32,
	followers map[int32]FollowerPosition, highWatermark, epochStart int64) []int32 {
	next := make([]int32, 0, len(replicas))
	for _, id := range replicas {
		if id == leaderID {
			next = append(next, id)
			continue
		}
		position, known := followers[id]
		if slices.Contains(isr, id) {
			if known && position.inSync(now, lagMax, grace) {
				next = append(next, id)
			}
			continue
		}
		if known && position.Disconnected.IsZero() && !position.CopyFailed && position.LogEnd >= highWatermark && position.LogEnd >= epochStart && now.Sub(position.LastFetch) <= lagMax {
			next = append(next, id)
		}
	}
	return next
}

// sameMembers reports whether a and b hold the same ids, in any order.
func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

// union is a followed by the members of b not in a.
func union(a, b []int32) []int32 {
	out := slices.Clone(a)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
