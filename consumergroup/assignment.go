package consumergroup

import (
	"cmp"
	"maps"
	"slices"
)

// TopicInfo is what assignment needs to know of a topic.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// TopicPartition names one partition by topic id.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

// Assignment is a set of partitions, by topic id.
type Assignment map[[16]byte][]int32

// set returns the assignment as a set of partitions.
func (a Assignment) set() map[TopicPartition]bool {
	out := map[TopicPartition]bool{}
	for id, partitions := range a {
		for _, p := range partitions {
			out[TopicPartition{id, p}] = true
		}
	}
	return out
}

// assignmentOf builds an assignment from a set (partitions sorted).
func assignmentOf(set map[TopicPartition]bool) Assignment {
	out := Assignment{}
	for tp := range set {
		out[tp.TopicID] = append(out[tp.TopicID], tp.Partition)
	}
	for id := range out {
		slices.Sort(out[id])
	}
	return out
}

// Len counts the partitions.
func (a Assignment) Len() int {
	n := 0
	for _, p := range a {
		n += len(p)
	}
	return n
}

// Clone copies an assignment.
func (a Assignment) Clone() Assignment {
	out := make(Assignment, len(a))
	for id, p := range a {
		if len(p) > 0 {
			out[id] = slices.Clone(p)
		}
	}
	return out
}

// Equal compares two assignments, ignoring empty topics.
func (a Assignment) Equal(b Assignment) bool {
	return maps.EqualFunc(a.Clone(), b.Clone(), func(x, y []int32) bool { return slices.Equal(x, y) })
}

// Assignors served.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// subscriber is one member as an assignor sees it.
type subscriber struct {
	id     string
	topics []string // resolved, sorted
	// rangeKey orders members for the range assignor: the instance id of a static member (so a
	// static member restarting under a new member id keeps its ranges), else the member id.
	rangeKey string
}

// assignUniform spreads every subscribed partition as evenly as the subscriptions allow, keeping
// each partition with its previous target owner where that keeps the balance.
func assignUniform(members []subscriber, topics map[string]TopicInfo, previous map[string]Assignment) map[string]Assignment {
	eligible := map[TopicPartition][]string{}
	var partitions []TopicPartition
	for _, m := range members {
		for _, name := range m.topics {
			info := topics[name]
			for p := range info.Partitions {
				tp := TopicPartition{info.ID, p}
				if eligible[tp] == nil {
					partitions = append(partitions, tp)
				}
				eligible[tp] = append(eligible[tp], m.id)
			}
		}
	}
	slices.SortFunc(partitions, func(a, b TopicPartition) int {
		return cmp.Or(slices.Compare(a.TopicID[:], b.TopicID[:]), cmp.Compare(a.Partition, b.Partition))
	})
	quota := 0
	if len(members) > 0 {
		quota = (len(partitions) + len(members) - 1) / len(members)
	}
	count := map[string]int{}
	owner := map[TopicPartition]string{}
	// Sticky pass: previous owners keep partitions up to the quota.
	for _, m := range members {
		for id, ps := range previous[m.id] {
			for _, p := range ps {
				tp := TopicPartition{id, p}
				if _, ok := owner[tp]; !ok && slices.Contains(eligible[tp], m.id) && count[m.id] < quota {
					owner[tp] = m.id
					count[m.id]++
				}
			}
		}
	}
	for _, tp := range partitions {
		if _, ok := owner[tp]; ok {
			continue
		}
		best := ""
		for _, id := range eligible[tp] {
			if best == "" || count[id] < count[best] || count[id] == count[best] && id < best {
				best = id
			}
		}
		owner[tp] = best
		count[best]++
	}
	return byMember(members, owner)
}

// assignRange gives each member, per topic, a contiguous range of partitions, members in rangeKey
// order (co-partitioned topics land together).
func assignRange(members []subscriber, topics map[string]TopicInfo) map[string]Assignment {
	owner := map[TopicPartition]string{}
	byTopic := map[string][]subscriber{}
	for _, m := range members {
		for _, name := range m.topics {
			byTopic[name] = append(byTopic[name], m)
		}
	}
	for name, subscribers := range byTopic {
		slices.SortFunc(subscribers, func(a, b subscriber) int { return cmp.Or(cmp.Compare(a.rangeKey, b.rangeKey), cmp.Compare(a.id, b.id)) })
		ids := make([]string, len(subscribers))
		for i, m := range subscribers {
			ids[i] = m.id
		}
		info := topics[name]
		n := int(info.Partitions)
		per, extra := n/len(ids), n%len(ids)
		next := 0
		for i, id := range ids {
			take := per
			if i < extra {
				take++
			}
			for range take {
				owner[TopicPartition{info.ID, int32(next)}] = id
				next++
			}
		}
	}
	return byMember(members, owner)
}

func byMember(members []subscriber, owner map[TopicPartition]string) map[string]Assignment {
	sets := map[string]map[TopicPartition]bool{}
	for _, m := range members {
		sets[m.id] = map[TopicPartition]bool{}
	}
	for tp, id := range owner {
		sets[id][tp] = true
	}
	out := map[string]Assignment{}
	for id, set := range sets {
		out[id] = assignmentOf(set)
	}
	return out
}
