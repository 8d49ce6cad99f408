package main

// Issue 10's acceptance tests 2, 3 and 5: paused followers, a divergent leader tail, and a rolling
// restart under load, each against three real sluiced processes.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
)

// knownTopicIDs caches topic ids for rawProduce, by client and topic name: a client belongs to
// one cluster, where the name means one topic (a test run again with -count makes it anew).
var knownTopicIDs sync.Map

type topicOfClient struct {
	client *kgo.Client
	topic  string
}

// rawProduce sends one batch of values to partition of topic on broker node and returns the
// partition's error code and base offset. The client's RequiredAcks decide the request's acks (kgo
// sets them on every produce request it sends).
func rawProduce(t *testing.T, client *kgo.Client, node int32, topic string, partition int32, values ...string) (int16, int64) {
	t.Helper()
	var b batch.Builder
	b.ProducerID = -1
	b.Reset(time.Now())
	for _, v := range values {
		b.Add(batch.Record{Value: []byte(v)})
	}
	req := kmsg.NewPtrProduceRequest()
	req.TimeoutMillis = 2000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	// Produce v13 (KIP-516) names topics by id, and kgo sends the highest version served. The id
	// is looked up once, on the node the batch goes to: another node may be paused by then.
	key := topicOfClient{client, topic}
	id, known := knownTopicIDs.Load(key)
	if !known {
		ids, ok := topicIDs(client.Broker(int(node)), topic)
		if !ok {
			return -1, -1
		}
		id, _ = knownTopicIDs.LoadOrStore(key, ids[topic])
	}
	rt.TopicID = id.([16]byte)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, b.Finish()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return -1, -1 // connection trouble: the caller retries
	}
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

// produceAcked produces value to partition 0 of topic on node until it is acknowledged, retrying
// the errors of a cluster that is still settling (a node that has not applied the topic yet, a
// leader change, an ISR that has not grown back), and returns its offset.
func produceAcked(t *testing.T, client *kgo.Client, node int32, topic, value string) int64 {
	t.Helper()
	var offset int64
	eventually(t, 30*time.Second, "acknowledgement of "+value, func() bool {
		code, base := rawProduce(t, client, node, topic, 0, value)
		switch code {
		case 0:
			offset = base
			return true
		case -1, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code, kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code, kerr.LeaderNotAvailable.Code:
			return false
		}
		t.Fatalf("produce %s to node %d: error %d", value, node, code)
		return false
	})
	return offset
}

// followersOf returns partition's replicas other than its leader.
func followersOf(info partitionInfo) []int32 {
	return slices.DeleteFunc(slices.Clone(info.replicas), func(id int32) bool { return id == info.leader })
}

// TestClusterPausedFollowers is acceptance 2: a SIGSTOPped follower leaves the ISR within the lag
// time while acks=all continues on two, and rejoins after SIGCONT; with two of three stopped,
// acks=all answers NOT_ENOUGH_REPLICAS and acknowledges nothing, and production resumes when they
// return. Nothing acknowledged is lost.
func TestClusterPausedFollowers(t *testing.T) {
	const topic = "paused"
	c := startCluster(t, 3)
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)
	info := leaderOf(t, admin, topic, 0)
	followers := followersOf(info)
	load := startLoad(t, c, "idem", topic)

	eventually(t, 30*time.Second, "records acknowledged", func() bool { return load.ackedCount() > 1000 })
	c.Node(followers[0]).Pause()
	pausedAt := time.Now()
	eventually(t, 20*time.Second, "the paused follower leaves the ISR", func() bool {
		parts, ok := describeTopic(admin, topic)
		return ok && !slices.Contains(parts[0].isr, followers[0]) && len(parts[0].isr) == 2
	})
	t.Logf("follower %d left the ISR %v after SIGSTOP", followers[0], time.Since(pausedAt).Round(time.Millisecond))
	// The leader reports the partition under-replicated and the paused follower lagging.
	leaderNode := c.Node(info.leader)
	eventually(t, 10*time.Second, "the leader's metrics show the shrunk ISR", func() bool {
		under, ok1 := scrapeMetric(t, leaderNode, "sluice_under_replicated_partitions")
		lag, ok2 := scrapeMetric(t, leaderNode, fmt.Sprintf(`sluice_follower_lag_records{topic="%s",partition="0",follower="%d"}`, topic, followers[0]))
		return ok1 && ok2 && under == 1 && lag > 0
	})
	shrunk := load.ackedCount()
	eventually(t, 20*time.Second, "acks=all continues on two replicas", func() bool { return load.ackedCount() > shrunk+1000 })
	c.Node(followers[0]).Resume()
	awaitFullISR(t, admin, topic, 30*time.Second)
	eventually(t, 10*time.Second, "the leader's metrics show a full ISR", func() bool {
		under, ok := scrapeMetric(t, leaderNode, "sluice_under_replicated_partitions")
		return ok && under == 0
	})

	// Two of three stopped: the leader is alone and must refuse acks=all.
	raw := clusterClient(t, c, kgo.DisableIdempotentWrite())
	eventually(t, 10*time.Second, "metadata for the raw client", func() bool { _, ok := describeTopic(raw, topic); return ok })
	c.Node(followers[0]).Pause()
	c.Node(followers[1]).Pause()
	code := int16(0)
	eventually(t, 30*time.Second, "acks=all refused with NOT_ENOUGH_REPLICAS", func() bool {
		// A probe sent before the lag time passed may be appended and time out: timed out is
		// not refused, and it may surface later.
		code, _ = rawProduce(t, raw, info.leader, topic, 0, "probe")
		return code == kerr.NotEnoughReplicas.Code
	})
	frozen := load.ackedCount()
	// Hold the pause for a while longer: the producers keep sending, and nothing may be acknowledged.
	for range 5 {
		if code, _ := rawProduce(t, raw, info.leader, topic, 0, "refused"); code != kerr.NotEnoughReplicas.Code {
			t.Fatalf("acks=all with one of three in sync answered %d, want NOT_ENOUGH_REPLICAS", code)
		}
	}
	if got := load.ackedCount(); got != frozen {
		t.Fatalf("%d records acknowledged while two of three replicas were stopped", got-frozen)
	}
	c.Node(followers[0]).Resume()
	c.Node(followers[1]).Resume()
	eventually(t, 30*time.Second, "production resumes", func() bool { return load.ackedCount() > frozen+1000 })
	awaitFullISR(t, admin, topic, 30*time.Second)

	acked := load.finish()
	t.Logf("acknowledged %d; errors seen: %v", len(acked), load.errors)
	read := readEverything(t, c, topic, 1)
	checkHistory(t, read, acked, func(v string) bool { return strings.HasPrefix(v, "idem-") })
	for _, r := range read[0] {
		if r.value == "refused" {
			t.Fatalf("a refused acks=all record is in the log at offset %d", r.offset)
		}
	}
	assertReplicasIdentical(t, c, topic, 1)
}

// TestClusterDivergentTailIsTruncated is acceptance 3: a leader takes acks=1 records that no
// follower has and dies; a follower becomes leader and takes acks=all records; the old leader
// returns, truncates its divergent tail and converges to byte-identical replicas.
func TestClusterDivergentTailIsTruncated(t *testing.T) {
	const topic = "divergent"
	c := startCluster(t, 3)
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)
	leaderOnly := clusterClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	allAcks := clusterClient(t, c, kgo.DisableIdempotentWrite())
	info := leaderOf(t, leaderOnly, topic, 0)
	eventually(t, 10*time.Second, "metadata for the acks=all client", func() bool { _, ok := describeTopic(allAcks, topic); return ok })

	var acked []ackedRecord
	for i := range 5 {
		value := fmt.Sprintf("committed-%d", i)
		acked = append(acked, ackedRecord{0, produceAcked(t, allAcks, info.leader, topic, value), value})
	}
	followers := followersOf(info)
	for _, f := range followers {
		c.Node(f).Pause()
	}
	// acks=1 records only the leader holds (a follower fetch parked at the leader may still carry
	// the first of them; the rest stay on the leader alone).
	for i := range 20 {
		if code, _ := rawProduce(t, leaderOnly, info.leader, topic, 0, fmt.Sprintf("divergent-%d;", i)); code != 0 {
			t.Fatalf("acks=1 produce to the leader alone: error %d", code)
		}
	}
	c.Node(info.leader).Kill()
	for _, f := range followers {
		c.Node(f).Resume()
	}
	eventually(t, 30*time.Second, "metadata lists the dead node's replica as offline", func() bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, admin)
		return err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 &&
			slices.Equal(resp.Topics[0].Partitions[0].OfflineReplicas, []int32{info.leader})
	})
	var next partitionInfo
	eventually(t, 30*time.Second, "a follower takes over", func() bool {
		parts, ok := describeTopic(admin, topic)
		next = parts[0]
		return ok && next.leader >= 0 && next.leader != info.leader && next.epoch > info.epoch
	})
	eventually(t, 10*time.Second, "metadata after the failover", func() bool { _, ok := describeTopic(allAcks, topic); return ok })
	for i := range 20 {
		value := fmt.Sprintf("after-%d", i)
		acked = append(acked, ackedRecord{0, produceAcked(t, allAcks, next.leader, topic, value), value})
	}
	if err := c.Node(info.leader).Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, topic, 60*time.Second)
	read := readEverything(t, c, topic, 1)
	checkHistory(t, read, acked, func(string) bool { return false }) // a timed-out try may be stored as well as its retry
	assertReplicasIdentical(t, c, topic, 1)
}

// TestClusterRollingRestart is acceptance 5: every node is restarted in turn with SIGTERM while
// idempotent and plain producers write with acks=all. No acknowledged record is lost, clients see
// only retriable errors, and kcat and a franz-go consumer group each read everything.
func TestClusterRollingRestart(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	const topic, partitions = "rolling", 6
	c := startCluster(t, 3)
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)
	idempotent := startLoad(t, c, "idem", topic)
	plain := startLoad(t, c, "plain", topic, kgo.DisableIdempotentWrite())
	total := func() int { return idempotent.ackedCount() + plain.ackedCount() }

	for _, node := range c.Nodes {
		before := total()
		eventually(t, 30*time.Second, "records acknowledged before the restart", func() bool { return total() > before+2000 })
		stopping := time.Now()
		if err := node.Stop(30 * time.Second); err != nil {
			t.Fatalf("node %d: SIGTERM: %v", node.ID, err)
		}
		t.Logf("node %d stopped %v after SIGTERM", node.ID, time.Since(stopping).Round(time.Millisecond))
		stopped := total()
		eventually(t, 30*time.Second, "production continues without the node", func() bool { return total() > stopped+1000 })
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		awaitFullISR(t, admin, topic, 60*time.Second)
	}
	acked := append(idempotent.finish(), plain.finish()...)
	t.Logf("acknowledged %d; errors seen: %v %v", len(acked), idempotent.errors, plain.errors)
	for _, g := range []*loadGenerator{idempotent, plain} {
		for name := range g.errors {
			if !retriableName(name) {
				t.Errorf("producer %s saw a non-retriable error: %s", g.name, name)
			}
		}
	}

	// kcat reads every partition to its end.
	out, err := exec.Command("kcat", "-C", "-b", strings.Join(c.Bootstrap(), ","), "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%p %o %s\n").Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	read := map[int32][]ackedRecord{}
	scanner := bufio.NewScanner(bytes.NewReader(out))
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 3 {
			t.Fatalf("kcat printed %q", scanner.Text())
		}
		p, _ := strconv.Atoi(fields[0])
		o, _ := strconv.ParseInt(fields[1], 10, 64)
		read[int32(p)] = append(read[int32(p)], ackedRecord{int32(p), o, fields[2]})
	}
	checkHistory(t, read, acked, func(v string) bool { return strings.HasPrefix(v, "idem-") })
	stored := 0
	for _, records := range read {
		stored += len(records)
	}

	// A franz-go consumer group reads the same number of records.
	group := clusterClient(t, c, kgo.ConsumerGroup("rolling-readers"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < stored && ctx.Err() == nil {
		group.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true })
	}
	if len(seen) != stored {
		t.Fatalf("the consumer group read %d records, kcat %d", len(seen), stored)
	}
}

// retriableName reports whether a producer error (by errorName) is one a Kafka client retries.
func retriableName(name string) bool {
	for code := int16(-1); code < 130; code++ {
		if err := kerr.ErrorForCode(code); err != nil {
			if ke, ok := err.(*kerr.Error); ok && ke.Message == name {
				return ke.Retriable
			}
		}
	}
	return false
}

// TestClusterRestartedLeaderWithLostTail replays what the chaos suite found (seed
// 1796175259477990328, a torn tail on a leader): a leader killed and restarted within its session,
// having lost the tail of its log, must not lead again at its old epoch, where it would hand the
// lost offsets out a second time; the replicas that kept the acknowledged records must win.
func TestClusterRestartedLeaderWithLostTail(t *testing.T) {
	const topic = "lost-tail"
	// A long session: the restart happens before the controller would notice the death.
	c := startCluster(t, 3, "--broker-session-timeout", "20s", "--leader-rebalance-interval", "0")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)
	client := clusterClient(t, c, kgo.DisableIdempotentWrite())
	info := leaderOf(t, admin, topic, 0)
	var acked []ackedRecord
	for i := range 30 {
		value := fmt.Sprintf("before-%d", i)
		acked = append(acked, ackedRecord{0, produceAcked(t, client, info.leader, topic, value), value})
	}
	leader := c.Node(info.leader)
	leader.Kill()
	// Cut the last ten batches (records) off the leader's log, as a lost or torn tail would.
	dir := filepath.Join(leader.DataDir, "topics", topic+"-0")
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("segment files in %s: %v %v", dir, logs, err)
	}
	last := logs[len(logs)-1]
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int // byte position after each batch
	end := 0
	batch.Scan(data, func(h batch.Header, _ []byte) error {
		end += h.Size()
		ends = append(ends, end)
		return nil
	})
	if len(ends) < 11 {
		t.Fatalf("%s holds %d batches, want more than 10", last, len(ends))
	}
	if err := os.Truncate(last, int64(ends[len(ends)-11])); err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		value := fmt.Sprintf("after-%d", i)
		next := leaderOf(t, admin, topic, 0)
		acked = append(acked, ackedRecord{0, produceAcked(t, client, next.leader, topic, value), value})
	}
	awaitFullISR(t, admin, topic, 60*time.Second)
	read := readEverything(t, c, topic, 1)
	checkHistory(t, read, acked, func(string) bool { return false })
	assertReplicasIdentical(t, c, topic, 1)
}
