package client

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkPlan asserts that plan gives every partition of a subscribed topic to exactly one
// subscribing member (or, when some partitions may be withheld, at most one), names every member,
// and returns the owner of each partition.
func checkPlan(t *testing.T, members []groupMember, counts map[string]int32, plan map[string][]TopicPartition, allAssigned bool) map[TopicPartition]string {
	t.Helper()
	owner := map[TopicPartition]string{}
	byID := map[string]*groupMember{}
	for i := range members {
		byID[members[i].memberID] = &members[i]
		if _, ok := plan[members[i].memberID]; !ok {
			t.Fatalf("member %s missing from the plan", members[i].memberID)
		}
	}
	for id, partitions := range plan {
		m := byID[id]
		if m == nil {
			t.Fatalf("plan names unknown member %s", id)
		}
		for _, tp := range partitions {
			if !m.subscribes(tp.Topic) || tp.Partition < 0 || tp.Partition >= counts[tp.Topic] {
				t.Fatalf("member %s got %v, which it cannot have", id, tp)
			}
			if previous, taken := owner[tp]; taken {
				t.Fatalf("%v assigned to %s and %s", tp, previous, id)
			}
			owner[tp] = id
		}
	}
	if allAssigned {
		for topic, count := range counts {
			subscribed := slices.ContainsFunc(members, func(m groupMember) bool { return m.subscribes(topic) })
			for p := int32(0); p < count && subscribed; p++ {
				if _, ok := owner[TopicPartition{topic, p}]; !ok {
					t.Fatalf("%s-%d assigned to nobody", topic, p)
				}
			}
		}
	}
	return owner
}

// spread returns the largest minus the smallest number of partitions per member.
func spread(plan map[string][]TopicPartition) int {
	lowest, highest := int(^uint(0)>>1), 0
	for _, partitions := range plan {
		lowest, highest = min(lowest, len(partitions)), max(highest, len(partitions))
	}
	return highest - lowest
}

func members(n int, topics ...string) []groupMember {
	out := make([]groupMember, n)
	for i := range out {
		out[i] = groupMember{memberID: fmt.Sprintf("m%02d", i), topics: slices.Sorted(slices.Values(topics)), generation: -1}
	}
	return out
}

func TestRangeAssignEveryPartitionOnceBalancedPerTopic(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for partitions := int32(0); partitions <= 25; partitions++ {
			ms := members(n, "a", "b")
			counts := map[string]int32{"a": partitions, "b": partitions/2 + 1}
			plan := rangeAssign(ms, counts)
			checkPlan(t, ms, counts, plan, true)
			for _, topic := range []string{"a", "b"} {
				perTopic := map[string][]TopicPartition{}
				for id, tps := range plan {
					perTopic[id] = slices.DeleteFunc(slices.Clone(tps), func(tp TopicPartition) bool { return tp.Topic != topic })
				}
				if s := spread(perTopic); s > 1 {
					t.Fatalf("%d members, topic %s: spread %d", n, topic, s)
				}
			}
		}
	}
}

func TestRangeAssignJavaExample(t *testing.T) {
	// Two members, two topics of three partitions: M0 [t0p0 t0p1 t1p0 t1p1], M1 [t0p2 t1p2].
	plan := rangeAssign(members(2, "t0", "t1"), map[string]int32{"t0": 3, "t1": 3})
	want := map[string][]TopicPartition{
		"m00": {{"t0", 0}, {"t0", 1}, {"t1", 0}, {"t1", 1}},
		"m01": {{"t0", 2}, {"t1", 2}},
	}
	for id, tps := range want {
		if !slices.Equal(plan[id], tps) {
			t.Errorf("%s got %v, want %v", id, plan[id], tps)
		}
	}
}

func TestRangeAssignStaticMembersOrderedByInstanceID(t *testing.T) {
	ms := []groupMember{
		{memberID: "a-dynamic", topics: []string{"t"}},
		{memberID: "z-new-id", instanceID: "instance-1", topics: []string{"t"}},
		{memberID: "b-new-id", instanceID: "instance-2", topics: []string{"t"}},
	}
	plan := rangeAssign(ms, map[string]int32{"t": 3})
	if !slices.Equal(plan["z-new-id"], []TopicPartition{{"t", 0}}) || !slices.Equal(plan["b-new-id"], []TopicPartition{{"t", 1}}) ||
		!slices.Equal(plan["a-dynamic"], []TopicPartition{{"t", 2}}) {
		t.Errorf("plan %v: static members should come first, by instance id", plan)
	}
}

func TestRangeAssignUnequalSubscriptions(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	topics := []string{"a", "b", "c", "d"}
	for round := 0; round < 500; round++ {
		ms := randomSubscriptions(random, 1+random.IntN(6), topics)
		counts := randomCounts(random, topics)
		checkPlan(t, ms, counts, rangeAssign(ms, counts), true)
	}
}

func randomSubscriptions(random *rand.Rand, n int, topics []string) []groupMember {
	ms := members(n)
	for i := range ms {
		for _, topic := range topics {
			if random.IntN(2) == 0 {
				ms[i].topics = append(ms[i].topics, topic)
			}
		}
		if len(ms[i].topics) == 0 {
			ms[i].topics = []string{topics[random.IntN(len(topics))]}
		}
	}
	return ms
}

func randomCounts(random *rand.Rand, topics []string) map[string]int32 {
	counts := map[string]int32{}
	for _, topic := range topics {
		counts[topic] = int32(random.IntN(12))
	}
	return counts
}

func TestCooperativeStickyFreshGroupBalanced(t *testing.T) {
	for n := 1; n <= 9; n++ {
		for partitions := int32(0); partitions <= 40; partitions++ {
			ms := members(n, "a", "b")
			counts := map[string]int32{"a": partitions, "b": partitions / 3}
			plan := cooperativeStickyAssign(ms, counts)
			checkPlan(t, ms, counts, plan, true)
			if s := spread(plan); s > 1 {
				t.Fatalf("%d members, %d partitions: spread %d: %v", n, partitions, s, plan)
			}
		}
	}
}

// rebalance runs the cooperative protocol to its end for the given members, who own what they
// owned in generation: each round's plan (with moving partitions held back) is applied, and while
// some member revoked something, it rejoins and another round follows. Members with equal
// subscriptions need two rounds at most; unequal subscriptions may take more, up to maxRounds.
// It checks the invariants of every round and returns the final plan, which assigns everything.
func rebalance(t *testing.T, ms []groupMember, counts map[string]int32, generation int32, maxRounds int) map[string][]TopicPartition {
	t.Helper()
	claimOf := func(id string, tp TopicPartition) int32 {
		for _, m := range ms {
			if m.memberID == id && slices.Contains(m.owned, tp) {
				return m.generation
			}
		}
		return -2
	}
	for round := 1; ; round++ {
		plan := cooperativeStickyAssign(ms, counts)
		owners := checkPlan(t, ms, counts, plan, false)
		// Nothing is planned for a member while another one has a stronger claim on it (a claim
		// of a higher generation, or any claim when the planned member has none).
		revoked := false
		for i := range ms {
			for _, tp := range ms[i].owned {
				if id, planned := owners[tp]; planned && id != ms[i].memberID && claimOf(id, tp) < ms[i].generation {
					t.Fatalf("round %d gives %v to %s while %s owns it", round, tp, id, ms[i].memberID)
				}
				if !slices.Contains(plan[ms[i].memberID], tp) {
					revoked = true
				}
			}
		}
		for i := range ms {
			ms[i].owned, ms[i].generation = slices.Clone(plan[ms[i].memberID]), generation+int32(round)
		}
		if !revoked {
			checkPlan(t, ms, counts, plan, true)
			return plan
		}
		if round == maxRounds {
			t.Fatalf("still revoking after %d rounds: %v", round, plan)
		}
	}
}

func TestCooperativeStickyMembershipChanges(t *testing.T) {
	random := rand.New(rand.NewPCG(3, 4))
	for run := 0; run < 40; run++ {
		counts := map[string]int32{"a": int32(random.IntN(30)), "b": int32(random.IntN(10))}
		total := int(counts["a"] + counts["b"])
		var ms []groupMember
		next, generation := 0, int32(0)
		for step := 0; step < 15; step++ {
			if len(ms) == 0 || len(ms) < 8 && random.IntN(2) == 0 {
				ms = append(ms, groupMember{memberID: fmt.Sprintf("m%03d", next), topics: []string{"a", "b"}, generation: -1})
				next++
			} else {
				i := random.IntN(len(ms))
				ms = slices.Delete(ms, i, i+1)
				if len(ms) == 0 {
					continue
				}
			}
			before := map[string][]TopicPartition{}
			for _, m := range ms {
				before[m.memberID] = slices.Clone(m.owned)
			}
			plan := rebalance(t, ms, counts, generation, 2)
			generation += 4
			if s := spread(plan); s > 1 {
				t.Fatalf("run %d step %d: spread %d: %v", run, step, s, plan)
			}
			// Stickiness: a member keeps what it owned, up to its fair share.
			fair := total / len(ms)
			for id, owned := range before {
				kept := 0
				for _, tp := range owned {
					if slices.Contains(plan[id], tp) {
						kept++
					}
				}
				if kept < min(len(owned), fair) {
					t.Fatalf("run %d step %d: %s kept %d of its %d partitions, fair share %d", run, step, id, kept, len(owned), fair)
				}
			}
		}
	}
}

func TestCooperativeStickyUnequalSubscriptions(t *testing.T) {
	random := rand.New(rand.NewPCG(5, 6))
	topics := []string{"a", "b", "c"}
	for run := 0; run < 200; run++ {
		ms := randomSubscriptions(random, 1+random.IntN(6), topics)
		counts := randomCounts(random, topics)
		rebalance(t, ms, counts, 0, 4)
		// Change the subscriptions and counts, then rebalance from what they own.
		for i := range ms {
			if random.IntN(3) == 0 {
				ms[i].topics = randomSubscriptions(random, 1, topics)[0].topics
			}
		}
		for topic := range counts {
			counts[topic] += int32(random.IntN(3))
		}
		rebalance(t, ms, counts, 8, 4)
	}
}

func TestCooperativeStickyStaleClaimLoses(t *testing.T) {
	// m00 claims partition 0 from generation 3, m01 from generation 5: m01 owns it, and a plan
	// moving it to m00 must hold it back until m01 revoked it.
	ms := []groupMember{
		{memberID: "m00", topics: []string{"t"}, owned: []TopicPartition{{"t", 0}}, generation: 3},
		{memberID: "m01", topics: []string{"t"}, owned: []TopicPartition{{"t", 0}, {"t", 1}, {"t", 2}}, generation: 5},
	}
	plan := cooperativeStickyAssign(ms, map[string]int32{"t": 3})
	if !slices.Equal(plan["m01"], []TopicPartition{{"t", 0}, {"t", 1}}) && !slices.Equal(plan["m01"], []TopicPartition{{"t", 0}, {"t", 2}}) &&
		!slices.Equal(plan["m01"], []TopicPartition{{"t", 1}, {"t", 2}}) {
		t.Fatalf("m01 should keep two of its partitions: %v", plan)
	}
	if len(plan["m00"]) != 0 {
		t.Fatalf("m00 gets %v in round 1; everything it could get is still owned by m01", plan["m00"])
	}
}

func TestCooperativeStickyIgnoresGonePartitionsAndTopics(t *testing.T) {
	ms := []groupMember{
		{memberID: "m00", topics: []string{"t"}, owned: []TopicPartition{{"t", 7}, {"gone", 0}, {"t", 0}}, generation: 1},
		{memberID: "m01", topics: []string{"t"}, generation: -1},
	}
	counts := map[string]int32{"t": 2}
	plan := rebalance(t, ms, counts, 1, 2)
	if spread(plan) != 0 {
		t.Fatalf("plan %v not balanced", plan)
	}
}

func FuzzCooperativeStickyAssign(f *testing.F) {
	f.Add([]byte{3, 7, 1, 2, 9, 4, 4, 0, 8})
	f.Fuzz(func(t *testing.T, input []byte) {
		if len(input) < 2 {
			return
		}
		topics := []string{"a", "b"}
		counts := map[string]int32{"a": int32(input[0] % 20), "b": int32(input[1] % 7)}
		ms := members(1+len(input)%5, topics...)
		for i, b := range input[2:] {
			m := &ms[i%len(ms)]
			m.owned = append(m.owned, TopicPartition{topics[b%2], int32(b/2) % 24})
			m.generation = int32(b % 3)
		}
		for i := range ms {
			slices.SortFunc(ms[i].owned, compareTopicPartitions)
			ms[i].owned = slices.Compact(ms[i].owned)
		}
		plan := rebalance(t, ms, counts, 3, 2)
		if s := spread(plan); s > 1 {
			t.Fatalf("spread %d: %v", s, plan)
		}
	})
}
