package client

import (
	"math"
	"slices"
)

// cooperativeStickyAssign is the cooperative-sticky strategy, in three steps:
//
//  1. Keep: each partition that still exists and that its owner still subscribes stays with its
//     owner. When several members claim one partition, the claim of the highest generation wins
//     (ties: the first member in compareMembers order); the other claims are stale.
//  2. Fill: every partition nobody keeps goes, in (topic, partition) order, to the subscribing
//     member with the fewest partitions (ties: member order).
//  3. Balance: while some member has two or more partitions more than a member that could take
//     one of them, the most loaded such member gives one to the least loaded, preferring a
//     partition it did not own before. Each move lowers the sum of squared counts, so this ends;
//     with equal subscriptions it ends with counts within one of each other, and a member that
//     owned no more than its fair share (partitions / members, rounded down) loses nothing.
//
// Finally cooperativeAdjust holds back every partition that moves from one member to another:
// its owner revokes it in this generation, and the next rebalance gives it to the new member.
func cooperativeStickyAssign(members []groupMember, partitionCounts map[string]int32) map[string][]TopicPartition {
	ordered := sortedMembers(members)
	owners := currentOwners(ordered, partitionCounts)
	plan := stickyPlan(ordered, partitionCounts, owners)
	return cooperativeAdjust(ordered, plan, owners)
}

// claim is the strongest claim on one partition.
type claim struct {
	member     *groupMember
	generation int32
}

// currentOwners resolves the members' owned lists into one owner per partition (step 1's rule).
// Claims on partitions that do not exist are ignored.
func currentOwners(ordered []*groupMember, partitionCounts map[string]int32) map[TopicPartition]claim {
	owners := map[TopicPartition]claim{}
	for _, m := range ordered {
		for _, tp := range m.owned {
			if tp.Partition < 0 || tp.Partition >= partitionCounts[tp.Topic] {
				continue
			}
			if current, ok := owners[tp]; !ok || m.generation > current.generation {
				owners[tp] = claim{m, m.generation}
			}
		}
	}
	return owners
}

// stickyPlan runs steps 1-3 and returns member id -> sorted partitions, every member present.
func stickyPlan(ordered []*groupMember, partitionCounts map[string]int32, owners map[TopicPartition]claim) map[string][]TopicPartition {
	index := make(map[string]int, len(ordered))
	for i, m := range ordered {
		index[m.memberID] = i
	}
	assigned := make([]map[TopicPartition]bool, len(ordered)) // by member index
	previous := make([]map[TopicPartition]bool, len(ordered))
	for i := range ordered {
		assigned[i] = map[TopicPartition]bool{}
		previous[i] = map[TopicPartition]bool{}
	}

	// Every partition of a topic some member subscribes, in order.
	var all []TopicPartition
	subscribed := map[string]bool{}
	for _, m := range ordered {
		for _, topic := range m.topics {
			subscribed[topic] = true
		}
	}
	for topic := range subscribed {
		for p := int32(0); p < partitionCounts[topic]; p++ {
			all = append(all, TopicPartition{topic, p})
		}
	}
	slices.SortFunc(all, compareTopicPartitions)

	// 1. Keep.
	var free []TopicPartition
	for _, tp := range all {
		if owner, ok := owners[tp]; ok && owner.member.subscribes(tp.Topic) {
			i := index[owner.member.memberID]
			assigned[i][tp] = true
			previous[i][tp] = true
			continue
		}
		free = append(free, tp)
	}

	// 2. Fill.
	for _, tp := range free {
		best := -1
		for i, m := range ordered {
			if m.subscribes(tp.Topic) && (best < 0 || len(assigned[i]) < len(assigned[best])) {
				best = i
			}
		}
		if best >= 0 { // always: tp's topic is subscribed by someone
			assigned[best][tp] = true
		}
	}

	// 3. Balance.
	for {
		from, to, moved := -1, -1, TopicPartition{}
		byLoad := make([]int, len(ordered))
		for i := range byLoad {
			byLoad[i] = i
		}
		slices.SortStableFunc(byLoad, func(a, b int) int { return len(assigned[b]) - len(assigned[a]) })
	search:
		for _, giver := range byLoad {
			for k := len(byLoad) - 1; k >= 0; k-- {
				taker := byLoad[k]
				if len(assigned[giver]) <= len(assigned[taker])+1 {
					break // takers further up are at least as loaded
				}
				if tp, ok := movable(assigned[giver], previous[giver], ordered[taker]); ok {
					from, to, moved = giver, taker, tp
					break search
				}
			}
		}
		if from < 0 {
			break
		}
		delete(assigned[from], moved)
		assigned[to][moved] = true
	}

	plan := make(map[string][]TopicPartition, len(ordered))
	for i, m := range ordered {
		partitions := make([]TopicPartition, 0, len(assigned[i]))
		for tp := range assigned[i] {
			partitions = append(partitions, tp)
		}
		slices.SortFunc(partitions, compareTopicPartitions)
		plan[m.memberID] = partitions
	}
	return plan
}

// movable picks the partition of a giver's set that taker may take: one the giver did not own
// before if there is such, else one it did; the greatest in (topic, partition) order, so that the
// choice is deterministic.
func movable(giver, previouslyOwned map[TopicPartition]bool, taker *groupMember) (TopicPartition, bool) {
	var best TopicPartition
	bestRank := math.MinInt
	for tp := range giver {
		if !taker.subscribes(tp.Topic) {
			continue
		}
		rank := 0
		if !previouslyOwned[tp] {
			rank = 1
		}
		if bestRank == math.MinInt || rank > bestRank || rank == bestRank && compareTopicPartitions(tp, best) > 0 {
			best, bestRank = tp, rank
		}
	}
	return best, bestRank != math.MinInt
}

// cooperativeAdjust removes from plan every partition planned for a member while another member
// holds the strongest claim on it: that owner is not given it, revokes it and rejoins, and the
// following rebalance assigns it (KIP-429). A weaker, stale claim of the planned member does not
// count as owning it.
func cooperativeAdjust(ordered []*groupMember, plan map[string][]TopicPartition, owners map[TopicPartition]claim) map[string][]TopicPartition {
	for _, m := range ordered {
		kept := plan[m.memberID][:0]
		for _, tp := range plan[m.memberID] {
			if owner, ok := owners[tp]; ok && owner.member.memberID != m.memberID && !claimsAt(m, tp, owner.generation) {
				continue
			}
			kept = append(kept, tp)
		}
		plan[m.memberID] = kept
	}
	return plan
}

// claimsAt reports whether m claims tp at generation at least generation (an equal claim counts
// as owning: each such claimant keeps what the plan gives it and revokes the rest).
func claimsAt(m *groupMember, tp TopicPartition, generation int32) bool {
	return m.generation >= generation && slices.Contains(m.owned, tp)
}
