package main

// Helpers for tests that run a cluster of real sluiced processes (localcluster).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/localcluster"
	"github.com/sluice-mq/sluice/segment"
)

// clusterArgs are timings that make failover quick and ISR changes visible within a test.
var clusterArgs = []string{"--replica-lag-time-max", "3s"}

// lockedBuffer collects the nodes' logs for a failure report (the first 32 MiB), and all of them
// in file when that is set.
type lockedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	file *os.File
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.file != nil {
		b.file.Write(p)
	}
	if b.buf.Len() > 32<<20 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) tail(lines int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	all := strings.Split(b.buf.String(), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func startCluster(t testing.TB, nodes int, args ...string) *localcluster.Cluster {
	t.Helper()
	return startClusterPrepared(t, nodes, nil, args...)
}

// startClusterPrepared is startCluster with prepare run before the nodes start (per-node
// environment, for the test hooks of test_hooks.go).
func startClusterPrepared(t testing.TB, nodes int, prepare func(*localcluster.Cluster), args ...string) *localcluster.Cluster {
	t.Helper()
	logs := &lockedBuffer{}
	// SLUICE_TEST_CLUSTER_LOGS=dir keeps a failed test's whole cluster log there.
	if dir := os.Getenv("SLUICE_TEST_CLUSTER_LOGS"); dir != "" {
		file, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())))
		if err != nil {
			t.Fatal(err)
		}
		logs.file = file
	}
	c, err := localcluster.New(localcluster.Config{
		Binary: sluicedBinary, Dir: t.TempDir(), Nodes: nodes, Args: append(slices.Clone(clusterArgs), args...), Logs: logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(c)
	}
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last cluster log lines:\n%s", logs.tail(300))
		}
		c.Close()
		if logs.file != nil {
			logs.mu.Lock()
			logs.file.Close()
			if !t.Failed() {
				os.Remove(logs.file.Name())
			}
			logs.mu.Unlock()
		}
	})
	return c
}

func clusterClient(t testing.TB, c *localcluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}

// createReplicatedTopic creates a topic with replication factor rf and the given configs.
func createReplicatedTopic(t testing.TB, client *kgo.Client, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		topic.Configs = append(topic.Configs, c)
	}
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 30_000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create topic %s: error %d %v", name, code, derefString(resp.Topics[0].ErrorMessage))
	}
}

// partitionInfo is one partition as the cluster's metadata describes it.
type partitionInfo struct {
	leader, epoch int32
	replicas, isr []int32
}

// describeTopic asks the cluster for topic's partitions; an error leaves ok false.
func describeTopic(client *kgo.Client, topic string) (map[int32]partitionInfo, bool) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil, false
	}
	out := map[int32]partitionInfo{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = partitionInfo{leader: p.Leader, epoch: p.LeaderEpoch, replicas: p.Replicas, isr: p.ISR}
	}
	return out, true
}

// topicIDs asks client (a cluster client, or one broker of it) for the named topics' ids.
func topicIDs(client kmsg.Requestor, topics ...string) (map[string][16]byte, bool) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, false
	}
	out := map[string][16]byte{}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || t.Topic == nil {
			return nil, false
		}
		out[*t.Topic] = t.TopicID
	}
	return out, true
}

// eventually polls condition every 50 ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, condition func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for !condition() {
		select {
		case <-deadline:
			t.Fatalf("%s: not within %v", what, timeout)
		case <-poll.C:
		}
	}
}

// lastNextOffset is the offset after the last whole batch of chunk.
func lastNextOffset(chunk []byte) (int64, error) {
	next := int64(-1)
	_, err := batch.Scan(chunk, func(h batch.Header, _ []byte) error {
		next = h.NextOffset()
		return nil
	})
	if next < 0 {
		return 0, fmt.Errorf("no whole batch in %d bytes: %v", len(chunk), err)
	}
	return next, nil
}

// readReplica reads a stopped node's whole log of topic-partition.
func readReplica(t testing.TB, node *localcluster.Node, topic string, partition int32) []byte {
	t.Helper()
	cfg := segment.DefaultConfig()
	cfg.Preallocate = false
	log, err := segment.Open(filepath.Join(node.DataDir, "topics", fmt.Sprintf("%s-%d", topic, partition)), cfg)
	if err != nil {
		t.Fatalf("open node %d's replica of %s-%d: %v", node.ID, topic, partition, err)
	}
	defer log.Close()
	var out []byte
	for offset := log.LogStartOffset(); offset < log.LogEndOffset(); {
		chunk, err := log.Read(offset, 8<<20, log.LogEndOffset(), nil)
		if err != nil {
			t.Fatalf("read node %d's %s-%d at %d: %v", node.ID, topic, partition, offset, err)
		}
		if len(chunk) == 0 {
			break
		}
		out = append(out, chunk...)
		next, err := lastNextOffset(chunk)
		if err != nil {
			t.Fatal(err)
		}
		offset = next
	}
	return out
}

// assertReplicasIdentical stops every node cleanly and compares each partition's replicas byte for
// byte.
func assertReplicasIdentical(t *testing.T, c *localcluster.Cluster, topic string, partitions int32) {
	t.Helper()
	for _, n := range c.Nodes {
		if err := n.Stop(60 * time.Second); err != nil {
			t.Errorf("node %d: %v", n.ID, err)
		}
	}
	for p := range partitions {
		var reference []byte
		for i, n := range c.Nodes {
			data := readReplica(t, n, topic, p)
			if i == 0 {
				reference = data
				continue
			}
			if !bytes.Equal(data, reference) {
				t.Errorf("%s-%d: node %d holds %d bytes, node 1 %d: replicas differ", topic, p, n.ID, len(data), len(reference))
			}
		}
	}
}

// scrapeMetric reads node's /metrics and returns the value of the series named exactly series
// (name with labels as exposed), and whether it was there.
func scrapeMetric(t testing.TB, node *localcluster.Node, series string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + node.HTTP + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if ok && name == series {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return v, err == nil
		}
	}
	return 0, false
}
