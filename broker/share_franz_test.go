package broker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzCreateTopic creates a topic through a franz-go client.
func franzCreateTopic(t testing.TB, client *kgo.Client, name string, partitions int32) {
	t.Helper()
	resp, err := createTopicRequest(name, partitions, nil).RequestWith(groupTestContext(t), client)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic %q: %v %+v", name, err, resp)
	}
}

// setGroupConfigs sets group configs with IncrementalAlterConfigs on resource type GROUP.
func setGroupConfigs(t testing.TB, client *kgo.Client, group string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	resource := kmsg.NewIncrementalAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = resourceGroup, group
	for _, key := range sortedKeys(configs) {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		value := configs[key]
		c.Name, c.Value = key, &value
		resource.Configs = append(resource.Configs, c)
	}
	req.Resources = append(req.Resources, resource)
	resp, err := req.RequestWith(groupTestContext(t), client)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter group configs of %q: %v %+v", group, err, resp)
	}
}

// shareWorker is one franz-go share-group consumer; handle decides each record's acknowledgement.
type shareWorker struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startShareWorker(t testing.TB, b *Broker, group, topic string, handle func(*kgo.Record) kgo.AckStatus, opts ...kgo.Opt) *shareWorker {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr().String()), kgo.ShareGroup(group), kgo.ConsumeTopics(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(groupTestContext(t))
	w := &shareWorker{client: client, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			fetches := client.PollRecords(ctx, 1000)
			fetches.EachRecord(func(r *kgo.Record) { r.Ack(handle(r)) })
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// stop ends polling and closes the client (its held records are released).
func (w *shareWorker) stop() {
	w.cancel()
	<-w.done
	w.client.Close()
}

// acceptLedger counts acceptances per (partition, offset).
type acceptLedger struct {
	*ledger
}

func (l acceptLedger) accept(r *kgo.Record) kgo.AckStatus {
	l.record([]*kgo.Record{r})
	return kgo.AckAccept
}

// TestShareGroupFranzWorkersSplitRecords: 20 franz-go share consumers on a 2-partition topic accept
// every record exactly once between them, and the share partitions end with nothing in flight.
func TestShareGroupFranzWorkersSplitRecords(t *testing.T) {
	b := startBroker(t, nil)
	admin := franzClient(t, b)
	franzCreateTopic(t, admin, "jobs", 2)
	setGroupConfigs(t, admin, "workers", map[string]string{"share.auto.offset.reset": "earliest"})
	const total = 20000
	produceNumbered(t, b, "jobs", total)
	accepted := acceptLedger{newLedger()}
	var mu sync.Mutex
	perWorker := map[int]int{}
	for i := range 20 {
		startShareWorker(t, b, "workers", "jobs", func(r *kgo.Record) kgo.AckStatus {
			mu.Lock()
			perWorker[i]++
			mu.Unlock()
			return accepted.accept(r)
		})
	}
	accepted.awaitUnique(groupTestContext(t), t, total)
	accepted.check(t, "share group", total, true)
	mu.Lock()
	t.Logf("records per worker: %v", perWorker)
	mu.Unlock()
	awaitShareDone(t, b, "workers", "jobs", 2, total)
}

// awaitShareDone waits until every share partition of topic has its start offset at perPartition
// records in total (everything acknowledged or archived), as persisted in the coordinator.
func awaitShareDone(t testing.TB, b *Broker, group, topic string, partitions int32, total int64) {
	t.Helper()
	ctx := groupTestContext(t)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		var sum int64
		state := b.coordinator.GroupState()
		for p := range partitions {
			if s, ok := state.SharePartition(group, topic, p); ok && len(s.Ranges) == 0 {
				sum += s.StartOffset
			}
		}
		if sum == total {
			return
		}
		b.shares.wakePersister()
		select {
		case <-ctx.Done():
			t.Fatalf("persisted share start offsets sum to %d, want %d", sum, total)
		case <-poll.C:
		}
	}
}

// TestShareGroupRedeliversAfterLockTimeout: records a worker acquired and never acknowledged (it
// stopped polling, as a hung worker does) go to another worker once their locks time out, with their
// delivery count raised (by one, or more when the hung client's own prefetch took them again
// before they timed out once more).
func TestShareGroupRedeliversAfterLockTimeout(t *testing.T) {
	b := startBroker(t, nil)
	admin := franzClient(t, b)
	franzCreateTopic(t, admin, "jobs", 1)
	setGroupConfigs(t, admin, "workers", map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000"})
	produceNumbered(t, b, "jobs", 100)

	hung := franzClient(t, b, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
	ctx := groupTestContext(t)
	var held []*kgo.Record
	for len(held) == 0 {
		held = hung.PollRecords(ctx, 1000).Records()
	}
	hungAt := time.Now()
	var mu sync.Mutex
	redelivered := map[int64]int32{}
	var lastRedelivery time.Time
	accepted := acceptLedger{newLedger()}
	startShareWorker(t, b, "workers", "jobs", func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		if r.DeliveryCount() > 1 {
			redelivered[r.Offset] = r.DeliveryCount()
			lastRedelivery = time.Now()
		}
		mu.Unlock()
		return accepted.accept(r)
	})
	accepted.awaitUnique(ctx, t, 100)
	accepted.check(t, "after lock timeout", 100, true)
	mu.Lock()
	defer mu.Unlock()
	for _, r := range held {
		if redelivered[r.Offset] < 2 {
			t.Errorf("offset %d held by the hung worker: redelivered with delivery count %d, want 2 or more", r.Offset, redelivered[r.Offset])
		}
	}
	t.Logf("%d records held by a hung worker; the last redelivered %v after it stopped (lock 1 s)", len(held), lastRedelivery.Sub(hungAt))
}

// TestShareGroupArchivesPastDeliveryLimit: rejected records are archived at once, released ones
// after share.delivery.count.limit deliveries; neither is delivered again, and the partition ends
// with nothing in flight.
func TestShareGroupArchivesPastDeliveryLimit(t *testing.T) {
	b := startBroker(t, nil)
	admin := franzClient(t, b)
	franzCreateTopic(t, admin, "jobs", 2)
	setGroupConfigs(t, admin, "workers", map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "3"})
	const total = 1000
	produceNumbered(t, b, "jobs", total)
	var mu sync.Mutex
	deliveries := map[string]int{}
	accepted := acceptLedger{newLedger()}
	handle := func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		deliveries[string(r.Value)]++
		mu.Unlock()
		n, _ := strconv.Atoi(string(r.Value))
		switch n % 10 {
		case 0:
			return kgo.AckRelease
		case 1:
			return kgo.AckReject
		}
		return accepted.accept(r)
	}
	for range 3 {
		startShareWorker(t, b, "workers", "jobs", handle)
	}
	awaitShareDone(t, b, "workers", "jobs", 2, total)
	accepted.check(t, "accepted", total*8/10, true)
	mu.Lock()
	defer mu.Unlock()
	for i := range total {
		want := 1
		switch i % 10 {
		case 0:
			want = 3
		}
		if got := deliveries[strconv.Itoa(i)]; got != want {
			t.Errorf("record %d delivered %d times, want %d", i, got, want)
		}
	}
}

// TestShareGroupStateSurvivesRestart: what was accepted before a broker restart is not delivered
// after it, and nothing is lost.
func TestShareGroupStateSurvivesRestart(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	b := startBrokerWith(t, cfg)
	admin := franzClient(t, b)
	franzCreateTopic(t, admin, "jobs", 2)
	setGroupConfigs(t, admin, "workers", map[string]string{"share.auto.offset.reset": "earliest"})
	const total = 2000
	produceNumbered(t, b, "jobs", total)
	accepted := acceptLedger{newLedger()}
	first := startShareWorker(t, b, "workers", "jobs", accepted.accept, kgo.ShareMaxRecords(100), kgo.ShareMaxRecordsStrict())
	accepted.awaitUnique(groupTestContext(t), t, total/4)
	first.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	accepted.mu.Lock()
	before := len(accepted.seen)
	accepted.mu.Unlock()

	cfg.Metrics = metrics.NewSet()
	b = startBrokerWith(t, cfg)
	startShareWorker(t, b, "workers", "jobs", accepted.accept)
	accepted.awaitUnique(groupTestContext(t), t, total)
	t.Logf("%d records accepted before the restart", before)
	accepted.check(t, "across a restart", total, true)
	awaitShareDone(t, b, "workers", "jobs", 2, total)
}
