package client

import (
	"cmp"
	"slices"
)

// Balancer is a strategy by which a group's leader assigns partitions to members. The group picks
// one protocol every member offers (the most preferred among them); the names are the standard
// ones, so sluice's client shares a group with Java, franz-go and librdkafka members using them.
//
// A Balancer's assignment function is pure (assign_*.go): it sees the members' subscriptions and
// the partition counts, and nothing else.
type Balancer struct {
	name string
	// cooperative balancers (KIP-429) let members keep their partitions across a rebalance and
	// revoke only those that move; eager ones make every member give up everything first.
	cooperative bool
	assign      func(members []groupMember, partitionCounts map[string]int32) map[string][]TopicPartition
}

// RangeBalancer is the "range" protocol (eager): per topic, members sorted by instance id (static
// members first) then member id take consecutive ranges, the first ones one partition more when
// the count does not divide. Balanced within one per topic, not across topics.
func RangeBalancer() Balancer { return Balancer{name: "range", assign: rangeAssign} }

// CooperativeStickyBalancer is the "cooperative-sticky" protocol (KIP-429): members keep what they
// own as far as balance allows, and a partition moving between members is revoked by its owner in
// one rebalance and assigned to its new owner in the next. For members with equal subscriptions
// the counts differ by at most one.
func CooperativeStickyBalancer() Balancer {
	return Balancer{name: "cooperative-sticky", cooperative: true, assign: cooperativeStickyAssign}
}

// Name is the protocol name sent in JoinGroup.
func (b Balancer) Name() string { return b.name }

// Cooperative reports whether the protocol rebalances incrementally.
func (b Balancer) Cooperative() bool { return b.cooperative }

// groupMember is one member's subscription as the leader sees it after JoinGroup.
type groupMember struct {
	memberID   string
	instanceID string           // "" for a dynamic member
	topics     []string         // subscribed topics, sorted
	owned      []TopicPartition // what it owned when it joined (cooperative protocols)
	generation int32            // the generation owned is from; -1 when unknown
}

// compareMembers is the order assignors use: static members first by instance id, then dynamic
// ones by member id (Java's MemberInfo order), so that a restarted static member, whose member id
// is new, keeps its place.
func compareMembers(a, b *groupMember) int {
	switch {
	case a.instanceID != "" && b.instanceID != "":
		if c := cmp.Compare(a.instanceID, b.instanceID); c != 0 {
			return c
		}
	case a.instanceID != "":
		return -1
	case b.instanceID != "":
		return 1
	}
	return cmp.Compare(a.memberID, b.memberID)
}

func compareTopicPartitions(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// sortedMembers returns members in compareMembers order, without duplicate member ids (the first
// one wins), leaving the argument alone.
func sortedMembers(members []groupMember) []*groupMember {
	out := make([]*groupMember, 0, len(members))
	seen := make(map[string]bool, len(members))
	for i := range members {
		if seen[members[i].memberID] {
			continue
		}
		seen[members[i].memberID] = true
		out = append(out, &members[i])
	}
	slices.SortFunc(out, compareMembers)
	return out
}

// subscribes reports whether m subscribes topic (m.topics is sorted).
func (m *groupMember) subscribes(topic string) bool {
	_, found := slices.BinarySearch(m.topics, topic)
	return found
}
