package coordinator

// The automatic preferred-leader rebalance (auto.leader.rebalance). Every LeaderRebalanceInterval
// the controller notes the partitions whose preferred replica could lead and does not; it moves
// them only rebalanceQuiet later, and only those that stayed quiet meanwhile:
//   - the partition is unchanged (same partition epoch: no leader or ISR change in between), and
//     its preferred replica may still lead;
//   - no member of its ISR reported, or was reported, unreachable since rebalanceQuiet before the
//     note (unreachable_leader.go).
//
// A move resets the new leader's view of its followers, and the controller cannot see a
// replication link fail until the followers on it report, 1.5-2 s later. Seen in a chaos run:
// the rebalance fired 1.4 s after node 3's replication links were cut, made node 3 leader of two
// partitions that nobody could fetch from, and moved two more to a leader that had to wait out the
// lag time afresh before dropping node 3: 3.2-4.0 s without acks on four partitions, where
// partitions left alone lost 2.2 s. The wait covers that blind spot: a cut that began before the
// note, or up to about rebalanceQuiet minus the reporting delay after it, has been reported by the
// time the move is due. A requested election (ElectLeaders) is not delayed.

import (
	"cmp"
	"slices"
	"time"
)

// rebalanceQuiet is how long candidates of an automatic rebalance wait, and how far back before
// they were noted a report about an ISR member keeps them from moving. It exceeds the followers'
// reporting delay (replication.Config.FetchMaxWait plus LeaderUnreachableAfter, 1.5 s by default)
// with room for the report to reach the controller.
const rebalanceQuiet = 2500 * time.Millisecond

// pendingRebalance is a rebalance noted and not yet made: the candidates' partition epochs.
type pendingRebalance struct {
	at         time.Time
	candidates map[TopicPartition]int32
}

// noteRebalance returns the partitions whose preferred replica could lead and does not, or nil.
func noteRebalance(m *Metadata, now time.Time) *pendingRebalance {
	live := liveIn(m)
	var candidates map[TopicPartition]int32
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			if _, err := preferPreferred(p, live); err != nil {
				continue
			}
			if candidates == nil {
				candidates = map[TopicPartition]int32{}
			}
			candidates[TopicPartition{Topic: t.Name, Partition: p.Index}] = p.PartitionEpoch
		}
	}
	if candidates == nil {
		return nil
	}
	return &pendingRebalance{at: now, candidates: candidates}
}

// quiet returns, sorted, the candidates still due to move in m: unchanged since noted, their
// preferred replica able to lead, and no ISR member named in a report made since rebalanceQuiet
// before the note.
func (r *pendingRebalance) quiet(m *Metadata, reports unreachableReports) []TopicPartition {
	live := liveIn(m)
	since := r.at.Add(-rebalanceQuiet)
	var out []TopicPartition
	for tp, epoch := range r.candidates {
		t, ok := m.Topics[tp.Topic]
		if !ok || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[tp.Partition]
		if p.PartitionEpoch != epoch {
			continue
		}
		if _, err := preferPreferred(p, live); err != nil {
			continue
		}
		if slices.ContainsFunc(p.ISR, func(id int32) bool { return reports.named(id, since) }) {
			continue
		}
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// rebalancer is the controller's rebalance in progress, kept by its liveness loop.
type rebalancer struct {
	lastNoted time.Time
	pending   *pendingRebalance // noted, not yet made
}

// rebalanceStep runs on each liveness tick of the controller: it notes candidates every interval
// and moves the quiet ones rebalanceQuiet later.
func (c *Coordinator) rebalanceStep(r *rebalancer, now time.Time) {
	interval := c.config.LeaderRebalanceInterval
	switch {
	case interval <= 0:
		return
	case r.pending == nil:
		if now.Sub(r.lastNoted) >= interval {
			r.lastNoted = now
			r.pending = noteRebalance(c.Metadata(), now)
		}
		return
	case now.Sub(r.pending.at) < rebalanceQuiet:
		return
	}
	pending := r.pending
	r.pending = nil
	c.liveness.mu.Lock()
	partitions := pending.quiet(c.Metadata(), c.liveness.unreachable)
	c.liveness.mu.Unlock()
	if skipped := len(pending.candidates) - len(partitions); skipped > 0 {
		c.logger.Info("coordinator: preferred leader rebalance skips partitions that were not quiet", "skipped", skipped, "moving", len(partitions))
	}
	if len(partitions) > 0 {
		if err := c.proposeAsLeader(&electPreferredCommand{Partitions: partitions}); err != nil {
			c.logger.Warn("coordinator: preferred leader rebalance", "error", err)
		}
	}
}
