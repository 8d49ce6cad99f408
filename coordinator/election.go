package coordinator

// Leader election policy, pure: no I/O, no clock, no randomness. The FSM applies it while
// applying fence-broker, unfence-broker and elect-preferred, so every node reaches the same result.

import "slices"

// electLeader chooses a leader for a partition with replicas and isr, given which brokers are
// live: the first live ISR member in replica order (the preferred replica first). With unclean and
// no live ISR member, the first live replica leads with an ISR of itself (data loss is possible and
// the caller logs it). With no candidate it returns -1 and the ISR unchanged.
func electLeader(replicas, isr []int32, live func(int32) bool, unclean bool) (leader int32, newISR []int32, wasUnclean bool) {
	for _, id := range replicas {
		if slices.Contains(isr, id) && live(id) {
			return id, isr, false
		}
	}
	if unclean {
		for _, id := range replicas {
			if live(id) {
				return id, []int32{id}, true
			}
		}
	}
	return -1, isr, false
}

// withoutMember is isr without id, unless id is its only member (Kafka keeps the last member of
// an ISR, so that it is the one to lead again when it returns).
func withoutMember(isr []int32, id int32) []int32 {
	if !slices.Contains(isr, id) || len(isr) == 1 {
		return isr
	}
	out := make([]int32, 0, len(isr)-1)
	for _, member := range isr {
		if member != id {
			out = append(out, member)
		}
	}
	return out
}

// fencePartition is partition p after broker id is fenced: it leaves the ISR (unless it is the
// last member) and, if it led, the next live ISR member leads (or none). changed reports a change.
func fencePartition(p Partition, id int32, live func(int32) bool, unclean bool) (next Partition, changed, wasUnclean bool) {
	if !slices.Contains(p.Replicas, id) {
		return p, false, false
	}
	next = p
	next.ISR = withoutMember(p.ISR, id)
	if p.Leader == id {
		next.Leader, next.ISR, wasUnclean = electLeader(p.Replicas, next.ISR, live, unclean)
		next.LeaderEpoch++
	}
	if next.Leader == p.Leader && slices.Equal(next.ISR, p.ISR) {
		return p, false, false
	}
	next.ISR = slices.Clone(next.ISR)
	next.Replicas = slices.Clone(p.Replicas)
	next.PartitionEpoch++
	return next, true, wasUnclean
}

// reviveOffline elects a leader for an offline partition (Leader -1) now that live changed.
func reviveOffline(p Partition, live func(int32) bool, unclean bool) (next Partition, changed, wasUnclean bool) {
	if p.Leader >= 0 {
		return p, false, false
	}
	leader, isr, wasUnclean := electLeader(p.Replicas, p.ISR, live, unclean)
	if leader < 0 {
		return p, false, false
	}
	next = p
	next.Leader, next.ISR = leader, slices.Clone(isr)
	next.Replicas = slices.Clone(p.Replicas)
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, true, wasUnclean
}

// preferPreferred makes the preferred replica (Replicas[0]) lead if it is live, in the ISR and
// not leading; otherwise it reports why not.
func preferPreferred(p Partition, live func(int32) bool) (Partition, error) {
	preferred := p.Replicas[0]
	switch {
	case p.Leader == preferred:
		return p, ErrElectionNotNeeded
	case !slices.Contains(p.ISR, preferred) || !live(preferred):
		return p, ErrPreferredLeaderNotAvailable
	}
	next := p
	next.Leader = preferred
	next.Replicas, next.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, nil
}
