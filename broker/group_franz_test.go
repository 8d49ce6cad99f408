package broker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupTestTimeout is a deadlock guard for the group tests, not a timing assertion.
const groupTestTimeout = 90 * time.Second

func groupTestContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), groupTestTimeout)
	t.Cleanup(cancel)
	return ctx
}

func franzClient(t testing.TB, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr().String())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// produceNumbered produces count records "0".."count-1" round-robin over the topic's partitions.
func produceNumbered(t testing.TB, b *Broker, topic string, count int) {
	t.Helper()
	producer := franzClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx := groupTestContext(t)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		producer.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(&err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("produce: %v", *err)
	}
}

// ledger counts deliveries of every (partition, offset) of a topic to one group.
type ledger struct {
	mu        sync.Mutex
	seen      map[[2]int64]int
	delivered int
	changed   chan struct{} // closed and replaced on every delivery batch
}

func newLedger() *ledger { return &ledger{seen: map[[2]int64]int{}, changed: make(chan struct{})} }

func (l *ledger) record(records []*kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range records {
		l.seen[[2]int64{int64(r.Partition), r.Offset}]++
		l.delivered++
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// awaitUnique waits until at least n distinct records were delivered.
func (l *ledger) awaitUnique(ctx context.Context, t testing.TB, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		unique, changed := len(l.seen), l.changed
		l.mu.Unlock()
		if unique >= n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%d distinct records delivered, waited for %d", unique, n)
		}
	}
}

// check asserts every one of total records was delivered, and exactly once if once is set.
func (l *ledger) check(t testing.TB, name string, total int, once bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	duplicates := 0
	for at, n := range l.seen {
		if n > 1 && duplicates < 5 {
			t.Logf("%s: partition %d offset %d delivered %d times", name, at[0], at[1], n)
		}
		duplicates += n - 1
	}
	t.Logf("%s: %d records delivered, %d distinct, %d delivered again", name, l.delivered, len(l.seen), duplicates)
	if len(l.seen) != total {
		t.Errorf("%s: %d distinct records delivered, want %d", name, len(l.seen), total)
	}
	if once && duplicates > 0 {
		t.Errorf("%s: %d records delivered more than once", name, duplicates)
	}
}

// budget gates consumption so that membership changes happen between known amounts of progress.
type budget struct {
	mu      sync.Mutex
	tokens  int
	changed chan struct{}
}

func newBudget() *budget { return &budget{changed: make(chan struct{})} }

func (b *budget) add(n int) {
	b.mu.Lock()
	b.tokens += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// take waits for tokens and takes up to max of them; 0 when ctx ends.
func (b *budget) take(ctx context.Context, max int) int {
	for {
		b.mu.Lock()
		if b.tokens > 0 {
			n := min(b.tokens, max)
			b.tokens -= n
			b.mu.Unlock()
			return n
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return 0
		}
	}
}

// groupMember is one franz-go group consumer feeding a ledger under a budget, committing exactly
// what it processed: on revoke, and before closing.
type groupMember struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startMember(t *testing.T, b *Broker, groupID, topic string, l *ledger, gate *budget, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.HeartbeatInterval(200 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", groupID, err)
			}
		}),
	}
	m.client = franzClient(t, b, append(base, opts...)...)
	ctx, cancel := context.WithCancel(groupTestContext(t))
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for {
			n := gate.take(ctx, 2000)
			if n == 0 {
				return
			}
			pollCtx, pollCancel := context.WithTimeout(ctx, 250*time.Millisecond)
			fetches := m.client.PollRecords(pollCtx, n)
			pollCancel()
			records := fetches.Records()
			l.record(records)
			gate.add(n - len(records))
			m.client.AllowRebalance()
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return m
}

// stop ends polling, commits what was processed and closes the client (leaving the group unless
// static).
func (m *groupMember) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.client.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("commit before close: %v", err)
	}
	m.client.Close()
}

// TestGroupConsumerChains runs three groups on one 500,000-record topic at once: eager range,
// cooperative-sticky, and static members (range) that restart under their instance ids. Members
// join and leave between slices of progress; commits on revoke and before close mean every record
// is delivered to each group exactly once.
func TestGroupConsumerChains(t *testing.T) {
	const total, partitions, slice = 500_000, 8, 50_000
	b := startBroker(t, nil)
	admin := dial(t, b)
	admin.createTopic("chain", partitions, nil)
	produceNumbered(t, b, "chain", total)

	chain := func(name string, steps func(start func(opts ...kgo.Opt) *groupMember, progress func())) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, gate := newLedger(), newBudget()
			ctx := groupTestContext(t)
			var members []*groupMember
			start := func(opts ...kgo.Opt) *groupMember {
				m := startMember(t, b, "chain-"+name, "chain", l, gate, opts...)
				members = append(members, m)
				return m
			}
			released := 0
			progress := func() {
				released += slice
				gate.add(slice)
				// Half the slice: records delivered twice use budget too, and the check reports them.
				l.awaitUnique(ctx, t, min(released-slice/2, total))
			}
			steps(start, progress)
			// The rest, with room for records delivered twice (which the check then reports).
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
	dynamic := func(balancer kgo.GroupBalancer) func(start func(...kgo.Opt) *groupMember, progress func()) {
		return func(start func(...kgo.Opt) *groupMember, progress func()) {
			balancers := kgo.Balancers(balancer)
			a := start(balancers)
			progress()
			b := start(balancers)
			progress()
			c := start(balancers)
			progress()
			a.stop(t)
			a.client = nil
			progress()
			d := start(balancers)
			progress()
			b.stop(t)
			b.client = nil
			c.stop(t)
			c.client = nil
			progress()
			start(balancers)
			progress()
			d.stop(t)
			d.client = nil
		}
	}
	chain("range", dynamic(kgo.RangeBalancer()))
	chain("cooperative-sticky", dynamic(kgo.CooperativeStickyBalancer()))
	chain("static", func(start func(...kgo.Opt) *groupMember, progress func()) {
		static := func(instance string) []kgo.Opt {
			return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.InstanceID(instance)}
		}
		current := map[string]*groupMember{}
		for _, instance := range []string{"s1", "s2", "s3"} {
			current[instance] = start(static(instance)...)
			progress()
		}
		// Restarts: the replacement takes over its instance's partitions without a rebalance.
		for _, instance := range []string{"s1", "s2", "s3", "s1"} {
			current[instance].stop(t)
			current[instance].client = nil
			current[instance] = start(static(instance)...)
			progress()
		}
	})
}
