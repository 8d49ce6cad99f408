package client_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/brokertest"
	"github.com/sluice-mq/sluice/client"
)

// groupTestTimeout guards the group tests against hangs; it is not a timing assertion.
const groupTestTimeout = 60 * time.Second

// startGroupBroker runs an in-process broker with small segments and a short initial rebalance
// delay.
func startGroupBroker(t *testing.T) string {
	t.Helper()
	return brokertest.Start(t, func(cfg *broker.Config) {
		cfg.Log.SegmentBytes = 1 << 20
		cfg.Groups.InitialRebalanceDelay = 100 * time.Millisecond
	}).Addr().String()
}

// groupWorld is what a group test watches: deliveries per (partition, offset) and ownership per
// member, with a channel closed and replaced on every change so that tests await conditions.
type groupWorld struct {
	mu      sync.Mutex
	seen    map[client.TopicPartition]map[int64]int
	owners  map[string]map[client.TopicPartition]bool // member name -> partitions
	events  map[string]int                            // member name -> assignment callbacks run
	changed chan struct{}
}

func newGroupWorld() *groupWorld {
	return &groupWorld{seen: map[client.TopicPartition]map[int64]int{}, owners: map[string]map[client.TopicPartition]bool{},
		events: map[string]int{}, changed: make(chan struct{})}
}

func (w *groupWorld) changedLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *groupWorld) deliver(topic string, partition int32, offset int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tp := client.TopicPartition{Topic: topic, Partition: partition}
	if w.seen[tp] == nil {
		w.seen[tp] = map[int64]int{}
	}
	w.seen[tp][offset]++
	w.changedLocked()
}

func (w *groupWorld) own(member string, partitions []client.TopicPartition, owned bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners[member] == nil {
		w.owners[member] = map[client.TopicPartition]bool{}
	}
	for _, tp := range partitions {
		if owned {
			w.owners[member][tp] = true
		} else {
			delete(w.owners[member], tp)
		}
	}
	w.events[member]++
	w.changedLocked()
}

// await waits until cond (called with the world locked) holds.
func (w *groupWorld) await(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for {
		w.mu.Lock()
		ok, changed := cond(), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("waiting for %s: %v; owners %v", what, ctx.Err(), w.owners)
		}
	}
}

// uniqueLocked counts distinct records delivered; duplicatesLocked those delivered again.
func (w *groupWorld) uniqueLocked() (unique, duplicates int) {
	for _, offsets := range w.seen {
		for _, n := range offsets {
			unique++
			duplicates += n - 1
		}
	}
	return unique, duplicates
}

// exclusiveLocked reports whether the named members own every partition of topic exactly once
// between them, each owning within one of the same number.
func (w *groupWorld) exclusiveLocked(topic string, partitions int32, members ...string) bool {
	count := map[int32]int{}
	lowest, highest := int(partitions), 0
	for _, m := range members {
		lowest, highest = min(lowest, len(w.owners[m])), max(highest, len(w.owners[m]))
		for tp := range w.owners[m] {
			count[tp.Partition]++
		}
	}
	for p := int32(0); p < partitions; p++ {
		if count[p] != 1 {
			return false
		}
	}
	return len(count) == int(partitions) && highest-lowest <= 1
}

// fastGroupOptions make rebalances quick to notice in tests.
func fastGroupOptions() []client.GroupOption {
	return []client.GroupOption{
		client.WithHeartbeatInterval(100 * time.Millisecond),
		client.WithSessionTimeout(6 * time.Second),
		client.WithRebalanceTimeout(10 * time.Second),
		client.WithAutoCommitInterval(200 * time.Millisecond),
		client.WithGroupConsumerOptions(client.WithFetchMaxWait(100 * time.Millisecond)),
	}
}

// groupMember is one GroupConsumer of a test, polling in the background into the world.
type groupMember struct {
	consumer *client.GroupConsumer
	done     chan error
}

// startMember starts a member named name (its client of its own) that polls until closed.
func startMember(t *testing.T, w *groupWorld, address, group, topic, name string, opts ...client.GroupOption) *groupMember {
	t.Helper()
	c := newClient(t, address)
	opts = append(append(fastGroupOptions(),
		client.WithOnAssigned(func(_ context.Context, partitions []client.TopicPartition) { w.own(name, partitions, true) }),
		client.WithOnRevoked(func(_ context.Context, partitions []client.TopicPartition) { w.own(name, partitions, false) }),
	), opts...)
	g, err := client.NewGroupConsumer(c, group, []string{topic}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{consumer: g, done: make(chan error, 1)}
	go func() {
		for {
			fetches, err := g.Poll(context.Background())
			if err != nil {
				if errors.Is(err, client.ErrClosed) {
					err = nil
				}
				m.done <- err
				return
			}
			for _, f := range fetches {
				if f.Err != nil {
					m.done <- f.Err
					return
				}
				for _, r := range f.Records {
					w.deliver(r.Topic, r.Partition, r.Offset)
				}
			}
		}
	}()
	t.Cleanup(func() { m.close(t) })
	return m
}

// close closes the member (once) and checks its poll loop ended without error.
func (m *groupMember) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := m.consumer.Close(ctx)
	if errors.Is(err, client.ErrClosed) {
		return
	}
	if err != nil {
		t.Errorf("close member: %v", err)
	}
	if err := <-m.done; err != nil {
		t.Errorf("member poll: %v", err)
	}
}

// produceSpread produces count records round-robin over partitions, values "0".."count-1" from
// first on.
func produceSpread(t *testing.T, p *client.Producer, topic string, partitions int32, first, count int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var failed error
	var mu sync.Mutex
	for i := first; i < first+count; i++ {
		r := &client.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(strconv.Itoa(i))}
		if err := p.Produce(ctx, r, func(_ *client.Record, err error) {
			mu.Lock()
			failed = errors.Join(failed, err)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if failed != nil {
		t.Fatal(failed)
	}
}

// Three members on six partitions: each partition has exactly one owner; a member closing
// cleanly hands its partitions to the others, and with commit on revoke every record is seen
// exactly once across the rebalance, while records are being produced.
func TestGroupThreeMembersHandOffExactlyOnce(t *testing.T) {
	for _, balancer := range []client.Balancer{client.RangeBalancer(), client.CooperativeStickyBalancer()} {
		t.Run(balancer.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
			defer cancel()
			address := startGroupBroker(t)
			c := newClient(t, address)
			const topic, partitions, batches, perBatch = "orders", 6, 20, 150
			createTopic(t, c, topic, partitions)
			producer := newProducer(t, c, client.WithPartitioner(client.ManualPartitioner()), client.WithLinger(time.Millisecond))
			produceSpread(t, producer, topic, partitions, 0, perBatch)

			w := newGroupWorld()
			names := []string{"m1", "m2", "m3"}
			members := map[string]*groupMember{}
			for _, name := range names {
				members[name] = startMember(t, w, address, "hand-off", topic, name, client.WithBalancers(balancer))
			}
			w.await(t, ctx, "three members owning two partitions each", func() bool { return w.exclusiveLocked(topic, partitions, names...) })

			// Produce in the background while m3 leaves.
			produced := make(chan struct{})
			go func() {
				defer close(produced)
				for b := 1; b < batches; b++ {
					produceSpread(t, producer, topic, partitions, b*perBatch, perBatch)
				}
			}()
			w.await(t, ctx, "progress", func() bool { unique, _ := w.uniqueLocked(); return unique >= 3*perBatch })
			members["m3"].close(t)
			w.await(t, ctx, "m1 and m2 owning three partitions each", func() bool {
				return len(w.owners["m3"]) == 0 && w.exclusiveLocked(topic, partitions, "m1", "m2")
			})
			<-produced
			w.await(t, ctx, "every record", func() bool { unique, _ := w.uniqueLocked(); return unique >= batches*perBatch })
			w.mu.Lock()
			unique, duplicates := w.uniqueLocked()
			w.mu.Unlock()
			if unique != batches*perBatch || duplicates != 0 {
				t.Errorf("%d distinct records seen, want %d; %d seen twice", unique, batches*perBatch, duplicates)
			}
			for _, name := range []string{"m1", "m2"} {
				if got := members[name].consumer.Membership().Protocol; got != balancer.Name() {
					t.Errorf("%s: protocol %q, want %q", name, got, balancer.Name())
				}
			}
		})
	}
}

// A franz-go member and two of ours share a group with either protocol (whoever leads); every
// partition has one owner, every record is seen once, and the franz-go member leaving (committing
// on revoke) hands its partitions over.
func TestGroupMixedWithFranzGo(t *testing.T) {
	for _, balancer := range []client.Balancer{client.RangeBalancer(), client.CooperativeStickyBalancer()} {
		t.Run(balancer.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
			defer cancel()
			address := startGroupBroker(t)
			c := newClient(t, address)
			const topic, partitions, records = "mixed", 6, 1200
			createTopic(t, c, topic, partitions)
			producer := newProducer(t, c, client.WithPartitioner(client.ManualPartitioner()), client.WithLinger(time.Millisecond))

			w := newGroupWorld()
			franzBalancer := kgo.RangeBalancer()
			if balancer.Cooperative() {
				franzBalancer = kgo.CooperativeStickyBalancer()
			}
			track := func(owned, commit bool) func(context.Context, *kgo.Client, map[string][]int32) {
				return func(ctx context.Context, franz *kgo.Client, assigned map[string][]int32) {
					if commit { // what franz-go's default OnPartitionsRevoked does
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
					w.own("franz", tps, owned)
				}
			}
			franz, err := kgo.NewClient(kgo.SeedBrokers(address), kgo.ConsumerGroup("mixed"), kgo.ConsumeTopics(topic),
				kgo.Balancers(franzBalancer), kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(6*time.Second),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
				kgo.OnPartitionsAssigned(track(true, false)), kgo.OnPartitionsRevoked(track(false, true)), kgo.OnPartitionsLost(track(false, false)))
			if err != nil {
				t.Fatal(err)
			}
			// franz-go joins first, so it leads while it is a member; ours lead after it left.
			w.await(t, ctx, "franz-go owning every partition", func() bool { return w.exclusiveLocked(topic, partitions, "franz") })
			ours1 := startMember(t, w, address, "mixed", topic, "ours-1", client.WithBalancers(balancer))
			ours2 := startMember(t, w, address, "mixed", topic, "ours-2", client.WithBalancers(balancer))
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
			w.await(t, ctx, "three members owning two partitions each", func() bool {
				return w.exclusiveLocked(topic, partitions, "ours-1", "ours-2", "franz")
			})
			produceSpread(t, producer, topic, partitions, 0, records)
			w.await(t, ctx, "every record", func() bool { unique, _ := w.uniqueLocked(); return unique >= records })

			if ours1.consumer.Membership().Leader || ours2.consumer.Membership().Leader {
				t.Error("one of ours leads, not franz-go")
			}
			franz.Close() // commits (in the revoke callback) and leaves
			<-franzDone
			w.await(t, ctx, "our two members owning three partitions each", func() bool {
				return len(w.owners["franz"]) == 0 && w.exclusiveLocked(topic, partitions, "ours-1", "ours-2")
			})
			produceSpread(t, producer, topic, partitions, records, records)
			w.await(t, ctx, "every record", func() bool { unique, _ := w.uniqueLocked(); return unique >= 2*records })
			if !ours1.consumer.Membership().Leader && !ours2.consumer.Membership().Leader {
				t.Error("neither of ours leads once franz-go left")
			}
			w.mu.Lock()
			unique, duplicates := w.uniqueLocked()
			w.mu.Unlock()
			if unique != 2*records || duplicates != 0 {
				t.Errorf("%d distinct records seen, want %d; %d seen twice", unique, 2*records, duplicates)
			}
		})
	}
}

// A member restarted resumes after what it committed; another group reads everything on its own;
// a group starting at the end (reset policy latest) sees only what comes later.
func TestGroupResumesFromCommittedOffsets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
	defer cancel()
	address := startGroupBroker(t)
	c := newClient(t, address)
	const topic, partitions, records = "resume", 3, 600
	createTopic(t, c, topic, partitions)
	producer := newProducer(t, c, client.WithPartitioner(client.ManualPartitioner()), client.WithLinger(time.Millisecond))
	produceSpread(t, producer, topic, partitions, 0, records)

	first, other := newGroupWorld(), newGroupWorld()
	member := startMember(t, first, address, "first", topic, "a")
	startMember(t, other, address, "other", topic, "b")
	first.await(t, ctx, "every record in the first group", func() bool { unique, _ := first.uniqueLocked(); return unique == records })
	member.close(t) // commits on close

	latest := newGroupWorld()
	startMember(t, latest, address, "latest", topic, "c", client.WithResetOffset(client.AtEnd()))
	latest.await(t, ctx, "the latest group's assignment", func() bool { return latest.exclusiveLocked(topic, partitions, "c") })

	produceSpread(t, producer, topic, partitions, records, records/2)
	startMember(t, first, address, "first", topic, "a-again")
	first.await(t, ctx, "the new records in the first group", func() bool { unique, _ := first.uniqueLocked(); return unique == records*3/2 })
	other.await(t, ctx, "every record in the other group", func() bool { unique, _ := other.uniqueLocked(); return unique == records*3/2 })
	latest.await(t, ctx, "the new records in the latest group", func() bool { unique, _ := latest.uniqueLocked(); return unique == records/2 })
	for name, w := range map[string]*groupWorld{"first": first, "other": other, "latest": latest} {
		w.mu.Lock()
		if _, duplicates := w.uniqueLocked(); duplicates != 0 {
			t.Errorf("group %s: %d records seen twice", name, duplicates)
		}
		for tp, offsets := range w.seen {
			if name == "latest" && slices.ContainsFunc(slices.Collect(mapsKeys(offsets)), func(o int64) bool { return o < records/partitions }) {
				t.Errorf("group latest read %s-%d from before it joined", tp.Topic, tp.Partition)
			}
		}
		w.mu.Unlock()
	}
}

func mapsKeys(m map[int64]int) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// A static member restarting with its instance id gets its partitions back in the same
// generation: the others are not rebalanced.
func TestGroupStaticMemberRestartsWithoutRebalance(t *testing.T) {
	for _, balancer := range []client.Balancer{client.RangeBalancer(), client.CooperativeStickyBalancer()} {
		t.Run(balancer.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
			defer cancel()
			address := startGroupBroker(t)
			c := newClient(t, address)
			const topic, partitions = "static", 6
			createTopic(t, c, topic, partitions)

			w := newGroupWorld()
			members := map[string]*groupMember{}
			for _, name := range []string{"s1", "s2", "s3"} {
				members[name] = startMember(t, w, address, "static", topic, name, client.WithBalancers(balancer), client.WithInstanceID(name))
			}
			w.await(t, ctx, "three static members owning two partitions each", func() bool {
				return w.exclusiveLocked(topic, partitions, "s1", "s2", "s3")
			})
			generation := members["s2"].consumer.Membership().Generation
			w.mu.Lock()
			before := maps(w.owners["s2"])
			eventsBefore := w.events["s1"] + w.events["s3"]
			w.mu.Unlock()

			members["s2"].close(t) // a static member does not leave
			w.await(t, ctx, "s2 revoked", func() bool { return len(w.owners["s2"]) == 0 })
			restarted := startMember(t, w, address, "static", topic, "s2", client.WithBalancers(balancer), client.WithInstanceID("s2"))
			w.await(t, ctx, "s2 back", func() bool { return len(w.owners["s2"]) == len(before) })

			w.mu.Lock()
			defer w.mu.Unlock()
			if got := maps(w.owners["s2"]); !slices.Equal(got, before) {
				t.Errorf("restarted s2 owns %v, before %v", got, before)
			}
			if membership := restarted.consumer.Membership(); membership.Generation != generation {
				t.Errorf("restarted s2 is in generation %d, the group was in %d: a rebalance happened", membership.Generation, generation)
			}
			if events := w.events["s1"] + w.events["s3"]; events != eventsBefore {
				t.Errorf("s1 and s3 saw %d assignment changes during the restart", events-eventsBefore)
			}
		})
	}
}

// maps lists a partition set, sorted.
func maps(set map[client.TopicPartition]bool) []client.TopicPartition {
	var out []client.TopicPartition
	for tp := range set {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b client.TopicPartition) int { return int(a.Partition - b.Partition) })
	return out
}

// A committed offset past the log end (OFFSET_OUT_OF_RANGE on fetch) is reset by the policy.
func TestGroupResetsOutOfRangeCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
	defer cancel()
	address := startGroupBroker(t)
	c := newClient(t, address)
	const topic, records = "reset", 50
	createTopic(t, c, topic, 1)
	producer := newProducer(t, c, client.WithPartitioner(client.ManualPartitioner()), client.WithLinger(time.Millisecond))
	produceSpread(t, producer, topic, 1, 0, records)

	w := newGroupWorld()
	first := startMember(t, w, address, "reset", topic, "a", client.WithAutoCommitInterval(0), client.WithCommitOnRevoke(false))
	w.await(t, ctx, "a's assignment", func() bool { return w.exclusiveLocked(topic, 1, "a") })
	if err := first.consumer.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: topic, Partition: 0}: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	w.await(t, ctx, "a reading everything", func() bool { unique, _ := w.uniqueLocked(); return unique == records })
	first.close(t)

	again := newGroupWorld()
	second := startMember(t, again, address, "reset", topic, "b")
	again.await(t, ctx, "b reading everything again", func() bool { unique, _ := again.uniqueLocked(); return unique == records })
	if err := second.consumer.CommitPolled(ctx); err != nil {
		t.Fatal(err)
	}
	committed, err := second.consumer.CommittedOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := committed[client.TopicPartition{Topic: topic, Partition: 0}]; got != records {
		t.Errorf("committed %d after reading everything again, want %d", got, records)
	}
}
