package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/localcluster"
)

// TestClusterFailedLogLeavesQuickly: one node's fsyncs start failing (the chaos suite's fsync-fail
// fault, through the test hook). The partition it leads moves to another in-sync replica, and it
// leaves the ISR of the partition it follows, at once rather than after the lag time (30 s here):
// acks=all producing to both carries on within seconds. Once fsyncs work again and the node
// restarts, it rejoins both ISRs.
func TestClusterFailedLogLeavesQuickly(t *testing.T) {
	const led, followed = "failed-led", "failed-followed"
	const failing = int32(1)
	faultFile := filepath.Join(t.TempDir(), "fsync-fail")
	c := startClusterPrepared(t, 3, func(c *localcluster.Cluster) {
		c.Node(failing).Env = []string{"SLUICE_TEST_FSYNC_FAIL_FILE=" + faultFile}
	}, "--replica-lag-time-max", "30s")
	admin := clusterClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := func(topic string, replicas []int32) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = 0, replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = "min.insync.replicas", kmsg.StringPtr("2")
		rt.Configs = append(rt.Configs, c)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", topic, err, resp)
		}
	}
	create(led, []int32{failing, 2, 3})
	create(followed, []int32{2, failing, 3})
	awaitFullISR(t, admin, led, 30*time.Second)
	awaitFullISR(t, admin, followed, 30*time.Second)

	// Raw produce requests to the leader (rawProduce: a 2 s broker-side timeout), so that an
	// acks=all that never comes fails instead of being retried for ever.
	producer := clusterClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(topic string) error {
		parts, ok := describeTopic(admin, topic)
		if !ok || parts[0].leader < 0 {
			return fmt.Errorf("%s: no leader known", topic)
		}
		if code, _ := rawProduce(t, producer, parts[0].leader, topic, 0, "v"); code != 0 {
			return fmt.Errorf("%s: produce to leader %d: error %d", topic, parts[0].leader, code)
		}
		return nil
	}
	for _, topic := range []string{led, followed} {
		eventually(t, 20*time.Second, "acks=all to "+topic, func() bool { return produce(topic) == nil })
	}

	if err := os.WriteFile(faultFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The first appends after the fault make node 1's logs fail; acks=all must go on without it
	// well within the 30 s lag time.
	for _, topic := range []string{led, followed} {
		eventually(t, 15*time.Second, "acks=all to "+topic+" without the failed node", func() bool {
			if produce(topic) != nil {
				return false
			}
			parts, ok := describeTopic(admin, topic)
			return ok && parts[0].leader != failing && !slices.Contains(parts[0].isr, failing)
		})
	}
	// It stays out while its copies have failed: every node says so after more appends (metadata
	// reads are not linearizable, so each node is asked until it has applied the latest).
	for range 3 {
		if err := produce(followed); err != nil {
			t.Fatalf("produce to %s with node %d's copy failed: %v", followed, failing, err)
		}
	}
	for _, n := range c.Nodes {
		eventually(t, 10*time.Second, fmt.Sprintf("node %d describes node %d out of every ISR", n.ID, failing), func() bool {
			m, ok := nodeMetadata(admin, n.ID)
			if !ok {
				return false
			}
			for _, topic := range []string{led, followed} {
				if len(m[topic]) != 1 || slices.Contains(m[topic][0].ISR, failing) {
					return false
				}
			}
			return true
		})
	}

	if err := os.Remove(faultFile); err != nil {
		t.Fatal(err)
	}
	c.Node(failing).Kill()
	if err := c.Node(failing).Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, led, 30*time.Second)
	awaitFullISR(t, admin, followed, 30*time.Second)
	assertReplicasIdentical(t, c, led, 1)
	assertReplicasIdentical(t, c, followed, 1)
}
