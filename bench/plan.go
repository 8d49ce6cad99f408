package bench

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Plan is what one process runs: its share of a workload's producers and consumers, on topics the
// coordinator created. A run without agents has one plan holding everything; with agents, Split
// deals the producers and consumers out round-robin.
type Plan struct {
	Workload Workload `json:"workload"`
	Driver   string   `json:"driver"`
	Brokers  []string `json:"brokers"`
	// TLS, when not nil, is the client config for the brokers. It does not travel to agents.
	TLS    *tls.Config `json:"-"`
	Topics []string    `json:"topics"`
	// Producers lists the topic index of each producer this plan runs.
	Producers []int `json:"producers"`
	// Consumers lists the consumers this plan runs.
	Consumers []ConsumerSlot `json:"consumers"`
}

// ConsumerSlot is one consumer: a member of consumer group Group of one topic (GroupID names it on
// the broker). The harness does not split partitions itself: the group's members, in this process
// or on other agents, share the topic's partitions through the broker's group coordinator.
type ConsumerSlot struct {
	Topic  int `json:"topic"`
	Group  int `json:"group"`
	Member int `json:"member"`
}

// GroupID is the broker's name for consumer group group of topic. Topic names are fresh for each
// run, so the groups are too (nothing committed before), and every agent derives the same name.
func GroupID(topic string, group int) string { return fmt.Sprintf("%s-group-%d", topic, group) }

// TopicNames returns fresh topic names for a run of w.
func TopicNames(w Workload) []string {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, w.Name)
	if base == "" {
		base = "bench"
	}
	suffix := fmt.Sprintf("%06x", rand.Uint32()&0xffffff)
	names := make([]string, w.Topics)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%s-%s-%d", base, suffix, i)
	}
	return names
}

// FullPlan is the plan that runs all of w in one process.
func FullPlan(w Workload, driver string, brokers, topics []string) Plan {
	plan := Plan{Workload: w, Driver: driver, Brokers: brokers, Topics: topics}
	for topic := range topics {
		for range w.Producers {
			plan.Producers = append(plan.Producers, topic)
		}
		for group := range w.ConsumerGroups {
			for member := range w.ConsumersPerGroup {
				plan.Consumers = append(plan.Consumers, ConsumerSlot{Topic: topic, Group: group, Member: member})
			}
		}
	}
	return plan
}

// Split deals p's producers and consumers over n plans, round-robin. Some plans may get nothing
// when the workload has fewer producers or consumers than n.
func (p Plan) Split(n int) []Plan {
	plans := make([]Plan, n)
	for i := range plans {
		plans[i] = Plan{Workload: p.Workload, Driver: p.Driver, Brokers: p.Brokers, Topics: p.Topics}
	}
	for i, topic := range p.Producers {
		plans[i%n].Producers = append(plans[i%n].Producers, topic)
	}
	for i, slot := range p.Consumers {
		plans[i%n].Consumers = append(plans[i%n].Consumers, slot)
	}
	return plans
}

// ratePerProducer is the target rate of one producer (0: as fast as possible).
func (p Plan) ratePerProducer() float64 {
	total := p.Workload.Producers * p.Workload.Topics
	if p.Workload.Rate == 0 || total == 0 {
		return 0
	}
	return float64(p.Workload.Rate) / float64(total)
}
