package main

// Issue 10's acceptance tests 4 and 6 and preferred-leader election: metadata changes while the
// controller dies, a consumer group across its coordinator's death, and ElectLeaders (API 43).

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// electLeaders sends ElectLeaders for the named partitions of topic (none: every partition) and
// returns each partition's error code.
func electLeaders(t *testing.T, client *kgo.Client, electionType int8, topic string, partitions ...int32) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType, req.TimeoutMillis = electionType, 10_000
	if len(partitions) > 0 {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ElectLeaders: error %d", resp.ErrorCode)
	}
	out := map[int32]int16{}
	for _, rt := range resp.Topics {
		if rt.Topic != topic {
			t.Fatalf("ElectLeaders answered for topic %q", rt.Topic)
		}
		for _, p := range rt.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

// TestClusterElectLeaders: after a node's controlled shutdown and return, the partitions it
// prefers are led elsewhere until ElectLeaders (all partitions) moves them back; a named partition
// already led by its preferred replica answers ELECTION_NOT_NEEDED, and unclean election through
// the API is refused.
func TestClusterElectLeaders(t *testing.T) {
	const topic, partitions = "preferred", 6
	c := startCluster(t, 3, "--leader-rebalance-interval", "0")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, partitions, 3, nil)
	awaitFullISR(t, admin, topic, 20*time.Second)
	if err := c.Node(1).Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Node(1).Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, topic, 30*time.Second)
	parts, ok := describeTopic(admin, topic)
	if !ok {
		t.Fatal("metadata")
	}
	var moved []int32
	for p, info := range parts {
		if info.replicas[0] == 1 {
			if info.leader == 1 {
				t.Fatalf("partition %d: node 1 leads again without an election (rebalance is off)", p)
			}
			moved = append(moved, p)
		}
	}
	if len(moved) == 0 {
		t.Fatal("node 1 is the preferred leader of no partition: placement did not spread leaders")
	}
	results := electLeaders(t, admin, 0, topic)
	var elected []int32
	for p, code := range results {
		if code != 0 {
			t.Fatalf("ElectLeaders (all): partition %d error %d", p, code)
		}
		elected = append(elected, p)
	}
	slices.Sort(elected)
	slices.Sort(moved)
	if !slices.Equal(elected, moved) {
		t.Fatalf("ElectLeaders (all) answered for partitions %v, want those preferring node 1 %v", elected, moved)
	}
	eventually(t, 10*time.Second, "preferred replicas lead every partition", func() bool {
		parts, ok := describeTopic(admin, topic)
		if !ok {
			return false
		}
		for _, info := range parts {
			if info.leader != info.replicas[0] {
				return false
			}
		}
		return true
	})
	if code := electLeaders(t, admin, 0, topic, 0)[0]; code != kerr.ElectionNotNeeded.Code {
		t.Fatalf("ElectLeaders for a partition its preferred replica leads: error %d, want ELECTION_NOT_NEEDED", code)
	}
	if code := electLeaders(t, admin, 1, topic, 0)[0]; code != kerr.InvalidRequest.Code {
		t.Fatalf("unclean ElectLeaders: error %d, want INVALID_REQUEST", code)
	}
	if code := electLeaders(t, admin, 0, "no-such-topic", 0); code[0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("ElectLeaders for an unknown topic: %v", code)
	}
}

// nodeMetadata asks one node for the named topics (nil: all) and returns them by name.
func nodeMetadata(client *kgo.Client, node int32) (map[string][]kmsg.MetadataResponseTopicPartition, bool) {
	req := kmsg.NewPtrMetadataRequest()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := client.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return nil, false
	}
	out := map[string][]kmsg.MetadataResponseTopicPartition{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.IsInternal {
			continue // __consumer_offsets is each node's own view of where offsets live
		}
		if t.ErrorCode != 0 || t.Topic == nil {
			return nil, false
		}
		ps := slices.Clone(t.Partitions)
		slices.SortFunc(ps, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
		for i := range ps {
			ps[i].UnknownTags = kmsg.Tags{}
		}
		out[*t.Topic] = ps
	}
	return out, true
}

// TestClusterControllerDeathDuringTopicCreation is acceptance 4: topics are created and leaders
// move while the controller is killed, three times over. Afterwards every node describes the same
// topics; each topic whose creation was acknowledged exists; every topic that exists is complete
// (all partitions, full replica sets, a leader each) and takes records.
func TestClusterControllerDeathDuringTopicCreation(t *testing.T) {
	c := startCluster(t, 3)
	admin := clusterClient(t, c)
	var created []string
	var attempted []string
	for round := range 3 {
		var controller int32 = -1
		eventually(t, 20*time.Second, "a controller", func() bool {
			req := kmsg.NewPtrMetadataRequest()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := req.RequestWith(ctx, admin)
			if err == nil {
				controller = resp.ControllerID
			}
			return err == nil && controller > 0
		})
		var mu sync.Mutex
		var wg sync.WaitGroup
		create := func(name string) {
			defer wg.Done()
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 4, 3
			req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10_000
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			resp, err := req.RequestWith(ctx, admin)
			if err == nil && resp.Topics[0].ErrorCode == 0 {
				mu.Lock()
				created = append(created, name)
				mu.Unlock()
			}
		}
		// Two creations before the kill, six in flight around it.
		for i := range 8 {
			name := fmt.Sprintf("round%d-topic%d", round, i)
			attempted = append(attempted, name)
			wg.Add(1)
			if i < 2 {
				create(name)
				continue
			}
			go create(name)
			if i == 4 {
				c.Node(controller).Kill()
			}
		}
		wg.Wait()
		if err := c.Node(controller).Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d creations acknowledged", len(created), len(attempted))
	if len(created) == 0 {
		t.Fatal("no topic creation was acknowledged across three controller deaths")
	}

	// Every node converges on the same complete topics.
	var converged map[string][]kmsg.MetadataResponseTopicPartition
	why := ""
	agree := func() bool {
		var first map[string][]kmsg.MetadataResponseTopicPartition
		for _, n := range c.Nodes {
			m, ok := nodeMetadata(admin, n.ID)
			if !ok {
				why = fmt.Sprintf("node %d: no metadata answer", n.ID)
				return false
			}
			for name, ps := range m {
				for _, p := range ps {
					if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
						why = fmt.Sprintf("node %d: %s-%d leader %d replicas %v isr %v", n.ID, name, p.Partition, p.Leader, p.Replicas, p.ISR)
						return false
					}
				}
			}
			if first == nil {
				first = m
			} else if !reflect.DeepEqual(first, m) {
				why = fmt.Sprintf("node %d's metadata differs from node 1's: %d vs %d topics", n.ID, len(m), len(first))
				for name, ps := range m {
					if !reflect.DeepEqual(ps, first[name]) {
						why += fmt.Sprintf("; %s: %+v vs %+v", name, ps, first[name])
						break
					}
				}
				return false
			}
		}
		converged = first
		return true
	}
	t.Cleanup(func() {
		if t.Failed() && why != "" {
			t.Logf("last disagreement: %s", why)
		}
	})
	eventually(t, 60*time.Second, "the nodes agree on complete topics with full ISRs", agree)
	for _, name := range created {
		if _, ok := converged[name]; !ok {
			t.Errorf("topic %s: creation acknowledged, topic absent", name)
		}
	}
	producer := clusterClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))
	for name, ps := range converged {
		if len(ps) != 4 {
			t.Errorf("topic %s has %d partitions, want 4", name, len(ps))
		}
		for _, p := range ps {
			if len(p.Replicas) != 3 {
				t.Errorf("topic %s partition %d has replicas %v, want 3", name, p.Partition, p.Replicas)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := producer.ProduceSync(ctx, &kgo.Record{Topic: name, Value: []byte("works")}).FirstErr()
		cancel()
		if err != nil {
			t.Errorf("topic %s: produce: %v", name, err)
		}
	}
}

// TestClusterGroupSurvivesCoordinatorDeath is acceptance 6: a consumer group of three franz-go
// members keeps consuming across the death (SIGKILL) of its coordinator's node, committed offsets
// never go back, and every acknowledged record is consumed.
func TestClusterGroupSurvivesCoordinatorDeath(t *testing.T) {
	const topic, group, partitions = "survive", "survivors", 6
	c := startCluster(t, 3)
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)
	load := startLoad(t, c, "idem", topic)

	var mu sync.Mutex
	consumed := map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var members sync.WaitGroup
	for range 3 {
		member := clusterClient(t, c, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(300*time.Millisecond),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
		members.Add(1)
		go func() {
			defer members.Done()
			for ctx.Err() == nil {
				member.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
					mu.Lock()
					consumed[string(r.Value)] = true
					mu.Unlock()
				})
			}
		}()
	}
	consumedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(consumed)
	}
	eventually(t, 30*time.Second, "the group consumes", func() bool { return consumedCount() > 2000 })

	coordinatorOf := func(not int32) int32 {
		var node int32 = -1
		eventually(t, 30*time.Second, fmt.Sprintf("the group's coordinator (not node %d)", not), func() bool {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey = group
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := req.RequestWith(ctx, admin)
			if err != nil || resp.ErrorCode != 0 {
				return false
			}
			node = resp.NodeID
			return node != not
		})
		return node
	}
	victim := coordinatorOf(-1)
	eventually(t, 20*time.Second, "offsets committed", func() bool { return len(committed(t, admin, group, topic)) == partitions })
	before := committed(t, admin, group, topic)
	c.Node(victim).Kill()
	killedAt := time.Now()
	t.Logf("killed node %d, coordinator of %s", victim, group)
	coordinatorOf(victim)
	eventually(t, 10*time.Second, "a live node's metrics count the fencing and the failover", func() bool {
		for _, n := range c.Nodes {
			if n.ID == victim {
				continue
			}
			fenced, ok1 := scrapeMetric(t, n, "sluice_brokers_fenced_total")
			failovers, ok2 := scrapeMetric(t, n, "sluice_controller_failover_seconds_count")
			if ok1 && ok2 && fenced >= 1 && failovers >= 1 {
				return true
			}
		}
		return false
	})
	atKill := consumedCount()
	eventually(t, 30*time.Second, "the group consumes again", func() bool { return consumedCount() > atKill+2000 })
	t.Logf("consuming again %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	// The admin client may still try the dead node first: ask until a live one answers.
	var after map[int32]int64
	eventually(t, 20*time.Second, "committed offsets from the new coordinator", func() bool {
		var err error
		after, err = fetchCommitted(admin, group, topic)
		return err == nil && len(after) == partitions
	})
	for p, offset := range before {
		if after[p] < offset {
			t.Errorf("partition %d: committed offset went back from %d to %d", p, offset, after[p])
		}
	}
	if err := c.Node(victim).Start(); err != nil {
		t.Fatal(err)
	}
	acked := load.finish()
	eventually(t, 60*time.Second, "every acknowledged record consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range acked {
			if !consumed[a.value] {
				return false
			}
		}
		return true
	})
	t.Logf("acknowledged %d, consumed %d distinct", len(acked), consumedCount())
}

// fetchCommitted is committed without failing the test: the group's committed offsets of topic, or
// the request's error.
func fetchCommitted(client *kgo.Client, groupID, topic string) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = groupID
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = topic, []int32{0, 1, 2, 3, 4, 5, 6, 7}
	req.Topics = append(req.Topics, ft)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}
