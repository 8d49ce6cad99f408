package main

// Manual replica assignment (issue 17) on a cluster of three sluiced processes: CreateTopics and
// CreatePartitions place partitions exactly on the brokers asked for, followers replicate them, and
// assignments naming unknown brokers, a broker twice, or inconsistent replication factors are
// refused with INVALID_REPLICA_ASSIGNMENT.

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
)

func TestClusterManualReplicaAssignment(t *testing.T) {
	const topic = "placed"
	c := startCluster(t, 3)
	client := clusterClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	create := func(name string, replicas ...[]int32) (int16, string) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for i, r := range replicas {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), r
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode, derefString(resp.Topics[0].ErrorMessage)
	}
	grow := func(name string, count int32, replicas ...[]int32) int16 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 30_000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, r := range replicas {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = r
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}

	want := [][]int32{{3, 1}, {2, 3}, {1, 2}}
	if code, message := create(topic, want...); code != 0 {
		t.Fatalf("create with a valid assignment: error %d %s", code, message)
	}
	const invalidReplicaAssignment = 39
	for name, replicas := range map[string][][]int32{
		"unknown-broker": {{1, 4}},
		"broker-twice":   {{2, 2}},
		"inconsistent":   {{1, 2}, {3}},
	} {
		if code, _ := create(name, replicas...); code != invalidReplicaAssignment {
			t.Errorf("create %s %v: error %d, want 39 INVALID_REPLICA_ASSIGNMENT", name, replicas, code)
		}
	}
	if code := grow(topic, 4, []int32{3}); code != invalidReplicaAssignment {
		t.Errorf("grow with one replica on a topic of two: error %d, want 39", code)
	}
	if code := grow(topic, 4, []int32{2, 1}); code != 0 {
		t.Fatalf("grow with a valid assignment: error %d", code)
	}
	want = append(want, []int32{2, 1})

	// Brokers learn of the new partition as they apply the change: any of them may answer.
	var parts map[int32]partitionInfo
	eventually(t, 30*time.Second, "every broker to see the new partition", func() bool {
		var ok bool
		parts, ok = describeTopic(client, topic)
		return ok && len(parts) == len(want)
	})
	awaitFullISR(t, client, topic, 30*time.Second)
	for p, replicas := range want {
		got := parts[int32(p)]
		if !slices.Equal(got.replicas, replicas) || got.leader != replicas[0] {
			t.Errorf("partition %d: replicas %v leader %d, want %v led by %d", p, got.replicas, got.leader, replicas, replicas[0])
		}
	}
	for p := range want {
		record := &kgo.Record{Partition: int32(p), Value: []byte(fmt.Sprintf("value %d", p))}
		// The client's own metadata may still show fewer partitions: refresh until it takes the record.
		eventually(t, 30*time.Second, fmt.Sprintf("a produce to partition %d", p), func() bool {
			if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
				t.Logf("produce to partition %d: %v", p, err)
				client.ForceMetadataRefresh()
				return false
			}
			return true
		})
	}
	// Each partition's log exists on its assigned brokers only, and the followers hold the record.
	for _, n := range c.Nodes {
		if err := n.Stop(60 * time.Second); err != nil {
			t.Fatalf("stop node %d: %v", n.ID, err)
		}
	}
	for p, replicas := range want {
		for _, n := range c.Nodes {
			dir := filepath.Join(n.DataDir, "topics", fmt.Sprintf("%s-%d", topic, p))
			_, err := os.Stat(dir)
			assigned := slices.Contains(replicas, n.ID)
			if assigned != (err == nil) {
				t.Errorf("partition %d on node %d: assigned %v, log directory: %v", p, n.ID, assigned, err)
				continue
			}
			if assigned && len(readReplica(t, n, topic, int32(p))) == 0 {
				t.Errorf("partition %d on node %d: no records", p, n.ID)
			}
		}
	}
}
