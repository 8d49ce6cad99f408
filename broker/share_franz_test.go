package broker

import (
	"context"
	"sync"
	"testing"
	"time"

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
