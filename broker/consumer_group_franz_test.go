package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroupKIP848Chains runs franz-go groups with the KIP-848 protocol (uniform and range
// assignors, static members, a regex subscription) next to a classic group, all on one topic at
// once. Members join and leave between slices of progress; commits on revoke and before close mean
// every record is delivered to each group exactly once.
func TestConsumerGroupKIP848Chains(t *testing.T) {
	const total, partitions, slice = 200_000, 6, 25_000
	b := startBroker(t, nil)
	admin := dial(t, b)
	admin.createTopic("chain848", partitions, nil)
	produceNumbered(t, b, "chain848", total)
	configs := franzClient(t, b)
	for _, name := range []string{"uniform", "range", "static", "regex"} {
		setGroupConfigs(t, configs, "kip848-"+name, map[string]string{"consumer.heartbeat.interval.ms": "200", "consumer.session.timeout.ms": "6000"})
	}

	chain := func(name string, topic string, steps func(start func(opts ...kgo.Opt) *groupMember, progress func())) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, gate := newLedger(), newBudget()
			ctx := groupTestContext(t)
			var members []*groupMember
			start := func(opts ...kgo.Opt) *groupMember {
				m := startMember(t, b, "kip848-"+name, topic, l, gate, opts...)
				members = append(members, m)
				return m
			}
			released := 0
			progress := func() {
				released += slice
				gate.add(slice)
				l.awaitUnique(ctx, t, min(released-slice/2, total))
			}
			steps(start, progress)
			gate.add(2 * total)
			l.awaitUnique(ctx, t, total)
			for _, m := range members {
				if m.client != nil {
					m.stop(t)
				}
			}
			l.check(t, name, total, true)
		})
	}
	dynamic := func(opts ...kgo.Opt) func(start func(...kgo.Opt) *groupMember, progress func()) {
		return func(start func(...kgo.Opt) *groupMember, progress func()) {
			a := start(opts...)
			progress()
			b := start(opts...)
			progress()
			c := start(opts...)
			progress()
			a.stop(t)
			a.client = nil
			progress()
			d := start(opts...)
			progress()
			b.stop(t)
			b.client = nil
			c.stop(t)
			c.client = nil
			progress()
			start(opts...)
			progress()
			d.stop(t)
			d.client = nil
		}
	}
	serverSide := kgo.ServerSideBalancer()
	chain("uniform", "chain848", dynamic(serverSide, kgo.Balancers(kgo.CooperativeStickyBalancer())))
	chain("range", "chain848", dynamic(serverSide, kgo.Balancers(kgo.RangeBalancer())))
	chain("regex", "chain8.*", dynamic(serverSide, kgo.ConsumeRegex()))
	chain("classic", "chain848", dynamic(kgo.Balancers(kgo.CooperativeStickyBalancer())))
	chain("static", "chain848", func(start func(...kgo.Opt) *groupMember, progress func()) {
		static := func(instance string) []kgo.Opt {
			return []kgo.Opt{serverSide, kgo.Balancers(kgo.RangeBalancer()), kgo.InstanceID(instance)}
		}
		current := map[string]*groupMember{}
		for _, instance := range []string{"s1", "s2", "s3"} {
			current[instance] = start(static(instance)...)
			progress()
		}
		for _, instance := range []string{"s1", "s2", "s3", "s1"} {
			current[instance].stop(t)
			current[instance].client = nil
			current[instance] = start(static(instance)...)
			progress()
		}
	})
	t.Cleanup(func() {
		// The KIP-848 groups are consumer groups, the classic one is not.
		req := kmsg.NewPtrListGroupsRequest()
		req.TypesFilter = []string{"consumer"}
		resp, err := req.RequestWith(groupTestContext(t), configs)
		if err != nil {
			t.Fatal(err)
		}
		types := map[string]string{}
		for _, g := range resp.Groups {
			types[g.Group] = g.GroupType
		}
		if types["kip848-uniform"] != "consumer" || types["kip848-classic"] != "" {
			t.Errorf("ListGroups types=consumer: %v", types)
		}
		describe := kmsg.NewPtrConsumerGroupDescribeRequest()
		describe.Groups = []string{"kip848-static", "kip848-classic"}
		described, err := describe.RequestWith(groupTestContext(t), configs)
		if err != nil {
			t.Fatal(err)
		}
		if g := described.Groups[0]; g.ErrorCode != 0 || g.AssignorName != "range" || g.Epoch == 0 {
			t.Errorf("ConsumerGroupDescribe of the static group: %+v", g)
		}
		if g := described.Groups[1]; g.ErrorCode != 69 {
			t.Errorf("ConsumerGroupDescribe of a classic group: error %d, want GROUP_ID_NOT_FOUND", g.ErrorCode)
		}
	})
}
