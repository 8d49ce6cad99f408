package client

import "slices"

// rangeAssign is the range strategy: for each topic, the members subscribing to it in
// compareMembers order; with n partitions and c members, member i takes n/c partitions starting
// at i*(n/c) + min(i, n%c), plus one more when i < n%c. Every member appears in the result, with
// an empty list when it gets nothing; lists are sorted.
func rangeAssign(members []groupMember, partitionCounts map[string]int32) map[string][]TopicPartition {
	ordered := sortedMembers(members)
	plan := make(map[string][]TopicPartition, len(ordered))
	byTopic := map[string][]*groupMember{}
	for _, m := range ordered {
		plan[m.memberID] = []TopicPartition{}
		for _, topic := range m.topics {
			byTopic[topic] = append(byTopic[topic], m)
		}
	}
	for topic, consumers := range byTopic {
		count := int(partitionCounts[topic])
		if count <= 0 {
			continue
		}
		// A member naming a topic twice must not take two ranges.
		consumers = slices.CompactFunc(consumers, func(a, b *groupMember) bool { return a.memberID == b.memberID })
		each, extra := count/len(consumers), count%len(consumers)
		for i, m := range consumers {
			start := i*each + min(i, extra)
			length := each
			if i < extra {
				length++
			}
			for p := start; p < start+length; p++ {
				plan[m.memberID] = append(plan[m.memberID], TopicPartition{topic, int32(p)})
			}
		}
	}
	for _, partitions := range plan {
		slices.SortFunc(partitions, compareTopicPartitions)
	}
	return plan
}
