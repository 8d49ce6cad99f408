package main

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deliveries counts the distinct record values a set of consumers saw.
type deliveries struct {
	mu     sync.Mutex
	seen   map[string]int
	counts map[[2]int32]int // share-group deliveries by (partition, delivery count)
}

func (d *deliveries) add(value string) {
	d.mu.Lock()
	d.seen[value]++
	d.mu.Unlock()
}

func (d *deliveries) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

// coordinatorOf asks FindCoordinator which node coordinates group.
func coordinatorOf(t *testing.T, client *kgo.Client, group string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("find coordinator of %s: %v %+v", group, err, resp)
	}
	return resp.Coordinators[0].NodeID
}

// TestClusterShareAndKIP848GroupsSurviveFailover: on a three-node cluster, a share group (six
// franz-go workers) and a KIP-848 consumer group (three franz-go members, uniform assignor) read one
// replicated topic while the leader of its partition 0 and both groups' coordinators are killed.
// Share-partition state is loaded by the new leaders from the coordinator, group state by the new
// coordinators: every record reaches both groups, and the share group ends with nothing in flight.
func TestClusterShareAndKIP848GroupsSurviveFailover(t *testing.T) {
	const topic, total = "jobs", 60_000
	c := startCluster(t, 3)
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 2, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for group, configs := range map[string]map[string]string{
		"workers": {"share.auto.offset.reset": "earliest"},
		"readers": {"consumer.heartbeat.interval.ms": "500", "consumer.session.timeout.ms": "6000"},
	} {
		resource := kmsg.NewIncrementalAlterConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		for key, value := range configs {
			config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			config.Name, config.Value = key, kmsg.StringPtr(value)
			resource.Configs = append(resource.Configs, config)
		}
		alter.Resources = append(alter.Resources, resource)
	}
	if resp, err := alter.RequestWith(ctx, admin); err != nil || resp.Resources[0].ErrorCode != 0 || resp.Resources[1].ErrorCode != 0 {
		t.Fatalf("group configs: %v %+v", err, resp)
	}
	producer := clusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var records []*kgo.Record
	for i := range total {
		records = append(records, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	shared := &deliveries{seen: map[string]int{}}
	read := &deliveries{seen: map[string]int{}}
	var wg sync.WaitGroup
	pollCtx, stopPolling := context.WithCancel(ctx)
	start := func(opts []kgo.Opt, each func(*kgo.Client, kgo.Fetches)) {
		client := clusterClient(t, c, opts...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				each(client, client.PollRecords(pollCtx, 200))
			}
		}()
	}
	for range 6 {
		start([]kgo.Opt{kgo.ShareGroup("workers"), kgo.ConsumeTopics(topic)}, func(_ *kgo.Client, f kgo.Fetches) {
			f.EachRecord(func(r *kgo.Record) {
				shared.add(string(r.Value))
				shared.mu.Lock()
				if shared.counts == nil {
					shared.counts = map[[2]int32]int{}
				}
				shared.counts[[2]int32{r.Partition, r.DeliveryCount()}]++
				shared.mu.Unlock()
				r.Ack(kgo.AckAccept)
			})
		})
	}
	for range 3 {
		start([]kgo.Opt{kgo.ConsumerGroup("readers"), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}, func(client *kgo.Client, f kgo.Fetches) {
			f.EachRecord(func(r *kgo.Record) { read.add(string(r.Value)) })
			if len(f.Records()) > 0 {
				client.CommitRecords(pollCtx, f.Records()...)
			}
		})
	}
	defer func() { stopPolling(); wg.Wait() }()

	// Round one: the leader of partition 0 dies while the share group is mid-stream; round two:
	// the KIP-848 group's coordinator dies. One node at a time, so the controllers keep a majority.
	eventually(t, time.Minute, "the share group mid-stream", func() bool { return shared.distinct() > total/5 })
	victim := leaderOf(t, admin, topic, 0).leader
	c.Node(victim).Kill()
	t.Logf("killed node %d (leader of partition 0) at %d/%d shared, %d/%d read", victim, shared.distinct(), total, read.distinct(), total)
	eventually(t, 2*time.Minute, "the share group reads on", func() bool { return shared.distinct() > total/2 })
	if err := c.Node(victim).Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, topic, time.Minute)
	coordinator := coordinatorOf(t, admin, "readers")
	c.Node(coordinator).Kill()
	t.Logf("killed node %d (coordinator of the KIP-848 group) at %d/%d shared, %d/%d read", coordinator, shared.distinct(), total, read.distinct(), total)
	eventually(t, 3*time.Minute, "every record reaches both groups", func() bool {
		return shared.distinct() == total && read.distinct() == total
	})
	// The share group ends with every record acknowledged (nothing in flight or waiting).
	eventually(t, time.Minute, "the share group has nothing left", func() bool {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = "workers"
		g.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{0, 1}}}
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
			return false
		}
		var starts int64
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			starts += p.StartOffset
		}
		return starts == total
	})
	again := 0
	shared.mu.Lock()
	for _, n := range shared.seen {
		again += n - 1
	}
	shared.mu.Unlock()
	t.Logf("share group: %d records delivered more than once (at-least-once across the failover); deliveries by [partition delivery-count]: %v", again, shared.counts)
}
