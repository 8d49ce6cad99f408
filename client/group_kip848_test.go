package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

// kip848GroupConfigs gives group short KIP-848 heartbeat and session settings and returns the
// franz-go client it used, for admin requests.
func kip848GroupConfigs(t *testing.T, ctx context.Context, address, group string) *kgo.Client {
	return kip848GroupConfigsWith(t, ctx, address, group, "6000")
}

func kip848GroupConfigsWith(t *testing.T, ctx context.Context, address, group, sessionMillis string) *kgo.Client {
	t.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(address))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	resource := kmsg.NewIncrementalAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for key, value := range map[string]string{"consumer.heartbeat.interval.ms": "100", "consumer.session.timeout.ms": sessionMillis} {
		config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		config.Name, config.Value = key, kmsg.StringPtr(value)
		resource.Configs = append(resource.Configs, config)
	}
	alter.Resources = append(alter.Resources, resource)
	if resp, err := alter.RequestWith(ctx, admin); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group configs: %v %+v", err, resp)
	}
	return admin
}

// Two of our members with the KIP-848 protocol and one franz-go KIP-848 member share a group on a
// six-partition topic: the broker's uniform assignor gives each two partitions, a partition is
// never assigned to a member while another still owns it (revoke before reassign), every record is
// read once, commits are accepted at the member epoch, and one of ours leaving (epoch -1) moves its
// partitions to the other two.
func TestGroupKIP848MixedWithFranzGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
	defer cancel()
	address := startGroupBroker(t)
	c := newClient(t, address)
	const topic, group, partitions, records = "kip848-mixed", "kip848-mixed", 6, 1200
	createTopic(t, c, topic, partitions)
	producer := newProducer(t, c, client.WithPartitioner(client.ManualPartitioner()), client.WithLinger(time.Millisecond))

	admin := kip848GroupConfigs(t, ctx, address, group)
	w := newGroupWorld()
	// assignedWhileOwned counts assignments of a partition another member still owned.
	assignedWhileOwned := 0
	own := func(member string, partitions []client.TopicPartition, owned bool) {
		if owned {
			w.mu.Lock()
			for other, set := range w.owners {
				for _, tp := range partitions {
					if other != member && set[tp] {
						t.Errorf("%s assigned %v while %s still owns it", member, tp, other)
						assignedWhileOwned++
					}
				}
			}
			w.mu.Unlock()
		}
		w.own(member, partitions, owned)
	}
	ours := func(name string) *groupMember {
		return startMember(t, w, address, group, topic, name, client.WithGroupProtocol(client.GroupProtocolConsumer),
			client.WithServerAssignor("uniform"),
			client.WithOnAssigned(func(_ context.Context, tps []client.TopicPartition) { own(name, tps, true) }),
			client.WithOnRevoked(func(_ context.Context, tps []client.TopicPartition) { own(name, tps, false) }))
	}
	track := func(owned, commit bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(ctx context.Context, franz *kgo.Client, assigned map[string][]int32) {
			if commit {
				if err := franz.CommitUncommittedOffsets(ctx); err != nil {
					t.Errorf("franz-go commit on revoke: %v", err)
				}
			}
			var tps []client.TopicPartition
			for topic, ps := range assigned {
				for _, p := range ps {
					tps = append(tps, client.TopicPartition{Topic: topic, Partition: p})
				}
			}
			own("franz", tps, owned)
		}
	}
	franz, err := kgo.NewClient(kgo.SeedBrokers(address), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.OnPartitionsAssigned(track(true, false)), kgo.OnPartitionsRevoked(track(false, true)), kgo.OnPartitionsLost(track(false, false)))
	if err != nil {
		t.Fatal(err)
	}
	franzDone := make(chan struct{})
	go func() {
		defer close(franzDone)
		for {
			fetches := franz.PollFetches(ctx)
			if fetches.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fetches.EachRecord(func(r *kgo.Record) { w.deliver(r.Topic, r.Partition, r.Offset) })
		}
	}()
	w.await(t, ctx, "franz-go owning every partition", func() bool { return w.exclusiveLocked(topic, partitions, "franz") })
	ours1, ours2 := ours("ours-1"), ours("ours-2")
	w.await(t, ctx, "three members owning two partitions each", func() bool {
		return w.exclusiveLocked(topic, partitions, "ours-1", "ours-2", "franz") && len(w.owners["ours-1"]) == 2
	})
	produceSpread(t, producer, topic, partitions, 0, records)
	w.await(t, ctx, "every record", func() bool { unique, _ := w.uniqueLocked(); return unique >= records })
	if m := ours1.consumer.Membership(); m.Generation <= 0 || m.MemberID == "" || m.Protocol != "uniform" {
		t.Errorf("membership of a KIP-848 member: %+v, want a member epoch above 0 and assignor uniform", m)
	}
	// A commit at the member epoch is accepted.
	commitCtx, commitCancel := context.WithTimeout(ctx, 10*time.Second)
	if err := ours1.consumer.CommitPolled(commitCtx); err != nil {
		t.Errorf("commit at the member epoch: %v", err)
	}
	commitCancel()

	ours2.close(t) // commits on revoke and leaves with epoch -1
	w.await(t, ctx, "ours-1 and franz-go owning three partitions each", func() bool {
		return len(w.owners["ours-2"]) == 0 && w.exclusiveLocked(topic, partitions, "ours-1", "franz")
	})
	produceSpread(t, producer, topic, partitions, records, records)
	w.await(t, ctx, "every record", func() bool { unique, _ := w.uniqueLocked(); return unique >= 2*records })

	// The group is a KIP-848 consumer group with the two remaining members.
	describe := kmsg.NewPtrConsumerGroupDescribeRequest()
	describe.Groups = []string{group}
	described, err := describe.RequestWith(ctx, admin)
	if err != nil || len(described.Groups) != 1 || described.Groups[0].ErrorCode != 0 {
		t.Fatalf("ConsumerGroupDescribe: %v %+v", err, described)
	}
	if g := described.Groups[0]; len(g.Members) != 2 || g.AssignorName != "uniform" {
		t.Errorf("ConsumerGroupDescribe: %d members, assignor %q; want 2 and uniform", len(g.Members), g.AssignorName)
	}

	ours1.close(t)
	franz.Close()
	<-franzDone
	w.mu.Lock()
	unique, duplicates := w.uniqueLocked()
	w.mu.Unlock()
	if unique != 2*records || duplicates != 0 || assignedWhileOwned != 0 {
		t.Errorf("%d distinct records seen, want %d; %d seen twice; %d assignments of owned partitions", unique, 2*records, duplicates, assignedWhileOwned)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = group
	fetched, err := fetch.RequestWith(ctx, admin)
	if err != nil || fetched.ErrorCode != 0 {
		t.Fatalf("OffsetFetch: %v %+v", err, fetched)
	}
	sum := int64(0)
	for _, tp := range fetched.Topics {
		for _, p := range tp.Partitions {
			sum += p.Offset
		}
	}
	if sum != 2*records {
		t.Errorf("committed offsets sum to %d, want %d", sum, 2*records)
	}
}

// A static KIP-848 member closing leaves with epoch -2 and keeps its place: restarted under its
// instance id (with a new member id) it gets its partitions back, even under the range assignor,
// and the other members see no assignment change.
func TestGroupKIP848StaticMemberRestarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
	defer cancel()
	address := startGroupBroker(t)
	c := newClient(t, address)
	const topic, group, partitions = "kip848-static", "kip848-static", 6
	createTopic(t, c, topic, partitions)
	kip848GroupConfigs(t, ctx, address, group)

	w := newGroupWorld()
	start := func(name string) *groupMember {
		return startMember(t, w, address, group, topic, name, client.WithGroupProtocol(client.GroupProtocolConsumer),
			client.WithServerAssignor("range"), client.WithInstanceID(name))
	}
	members := map[string]*groupMember{}
	for _, name := range []string{"s1", "s2", "s3"} {
		members[name] = start(name)
	}
	w.await(t, ctx, "three static members owning two partitions each", func() bool {
		return w.exclusiveLocked(topic, partitions, "s1", "s2", "s3") && len(w.owners["s1"]) == 2
	})
	before := members["s2"].consumer.Membership()
	w.mu.Lock()
	owned := maps(w.owners["s2"])
	eventsBefore := w.events["s1"] + w.events["s3"]
	w.mu.Unlock()

	members["s2"].close(t)
	w.await(t, ctx, "s2 revoked", func() bool { return len(w.owners["s2"]) == 0 })
	restarted := start("s2")
	w.await(t, ctx, "s2 back", func() bool { return len(w.owners["s2"]) == len(owned) })

	w.mu.Lock()
	defer w.mu.Unlock()
	if got := maps(w.owners["s2"]); !slices.Equal(got, owned) {
		t.Errorf("restarted s2 owns %v, before %v", got, owned)
	}
	after := restarted.consumer.Membership()
	if after.MemberID == before.MemberID || after.Generation < before.Generation {
		t.Errorf("restarted s2: %+v, before %+v; want a new member id, its epoch not behind", after, before)
	}
	if events := w.events["s1"] + w.events["s3"]; events != eventsBefore {
		t.Errorf("s1 and s3 saw %d assignment changes during the restart", events-eventsBefore)
	}
}

// A KIP-848 member of ours whose OnAssigned callback holds its heartbeats past the session timeout
// is dropped by the broker (its partitions go back to the franz-go member); it then learns so
// (UNKNOWN_MEMBER_ID), loses its partitions (OnLost, no commit), rejoins at epoch 0 and gets its
// share back. Every record is read at least once.
func TestGroupKIP848MemberDroppedRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
	defer cancel()
	address := startGroupBroker(t)
	c := newClient(t, address)
	const topic, group, partitions, records = "kip848-dropped", "kip848-dropped", 4, 400
	createTopic(t, c, topic, partitions)
	producer := newProducer(t, c, client.WithPartitioner(client.ManualPartitioner()), client.WithLinger(time.Millisecond))
	kip848GroupConfigsWith(t, ctx, address, group, "1000")

	w := newGroupWorld()
	franzOwns := func(assigned bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			var tps []client.TopicPartition
			for _, p := range m[topic] {
				tps = append(tps, client.TopicPartition{Topic: topic, Partition: p})
			}
			w.own("franz", tps, assigned)
		}
	}
	franz, err := kgo.NewClient(kgo.SeedBrokers(address), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.OnPartitionsAssigned(franzOwns(true)), kgo.OnPartitionsRevoked(franzOwns(false)), kgo.OnPartitionsLost(franzOwns(false)))
	if err != nil {
		t.Fatal(err)
	}
	franzDone := make(chan struct{})
	go func() {
		defer close(franzDone)
		for {
			fetches := franz.PollFetches(ctx)
			if fetches.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fetches.EachRecord(func(r *kgo.Record) { w.deliver(r.Topic, r.Partition, r.Offset) })
		}
	}()
	defer func() { franz.Close(); <-franzDone }()
	w.await(t, ctx, "franz-go owning every partition", func() bool { return w.exclusiveLocked(topic, partitions, "franz") })
	produceSpread(t, producer, topic, partitions, 0, records)

	var lost [][]client.TopicPartition
	first := true
	member := startMember(t, w, address, group, topic, "ours", client.WithGroupProtocol(client.GroupProtocolConsumer),
		client.WithOnAssigned(func(_ context.Context, tps []client.TopicPartition) {
			w.own("ours", tps, true)
			if !first {
				return
			}
			first = false
			// Hold the heartbeats until the broker gave everything back to franz-go.
			for {
				w.mu.Lock()
				back, changed := len(w.owners["franz"]) == partitions, w.changed
				w.mu.Unlock()
				if back {
					return
				}
				select {
				case <-changed:
				case <-ctx.Done():
					return
				}
			}
		}),
		client.WithOnLost(func(_ context.Context, tps []client.TopicPartition) {
			w.mu.Lock()
			lost = append(lost, tps)
			w.mu.Unlock()
			w.own("ours", tps, false)
		}))
	w.await(t, ctx, "ours lost its partitions and rejoined for two of them", func() bool {
		return len(lost) == 1 && w.exclusiveLocked(topic, partitions, "ours", "franz")
	})
	if m := member.consumer.Membership(); m.Generation <= 0 {
		t.Errorf("after the rejoin: %+v", m)
	}
	produceSpread(t, producer, topic, partitions, records, records)
	w.await(t, ctx, "every record", func() bool { unique, _ := w.uniqueLocked(); return unique >= 2*records })
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(lost[0]) != partitions/2 {
		t.Errorf("lost %v, want the %d partitions it owned", lost[0], partitions/2)
	}
}
