package broker

// CreateTopics and CreatePartitions with manual replica assignments on one broker (node 1): valid
// ones place the partitions as asked, invalid ones get Kafka's codes. The cluster test in
// cmd/sluiced places replicas over three nodes.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// assignedTopic is a CreateTopics topic with replicas[i] for partition i.
func assignedTopic(name string, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for i, r := range replicas {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), r
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	return rt
}

func createTopicsAt(c *testConn, version int16, validateOnly bool, rt kmsg.CreateTopicsRequestTopic) kmsg.CreateTopicsResponseTopic {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(version)
	req.TimeoutMillis, req.ValidateOnly = 10_000, validateOnly
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	return roundTrip[*kmsg.CreateTopicsResponse](c, req).Topics[0]
}

func growTopic(c *testConn, name string, count int32, replicas ...[]int32) int16 {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(3)
	req.TimeoutMillis = 10_000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = name, count
	for _, r := range replicas {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = r
		rt.Assignment = append(rt.Assignment, a)
	}
	req.Topics = append(req.Topics, rt)
	return roundTrip[*kmsg.CreatePartitionsResponse](c, req).Topics[0].ErrorCode
}

func TestManualReplicaAssignment(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	node := b.config.NodeID

	for _, version := range []int16{0, 4, 7} {
		name := "assigned-v" + string(rune('0'+version))
		result := createTopicsAt(c, version, false, assignedTopic(name, []int32{node}, []int32{node}, []int32{node}))
		wantCode(t, name, result.ErrorCode, protocol.None)
		if version >= 5 && (result.NumPartitions != 3 || result.ReplicationFactor != 1) {
			t.Fatalf("%s: %d partitions, replication factor %d", name, result.NumPartitions, result.ReplicationFactor)
		}
		if partitions, exists := c.topicPartitions(name); !exists || partitions != 3 {
			t.Fatalf("%s: %d partitions", name, partitions)
		}
	}
	c.mustProduce("assigned-v7", 2, recordBatch(batchTime, "placed by hand"))
	assertRecords(t, c.readAll("assigned-v7", 2), "placed by hand")

	refused := func(want protocol.ErrorCode, rt kmsg.CreateTopicsRequestTopic) {
		t.Helper()
		for _, validateOnly := range []bool{true, false} {
			wantCode(t, rt.Topic, createTopicsAt(c, 7, validateOnly, rt).ErrorCode, want)
		}
		if _, exists := c.topicPartitions(rt.Topic); exists {
			t.Fatalf("%s was created", rt.Topic)
		}
	}
	refused(protocol.InvalidReplicaAssignment, assignedTopic("unknown-broker", []int32{node + 10}))
	refused(protocol.InvalidReplicaAssignment, assignedTopic("twice", []int32{node, node}))
	refused(protocol.InvalidReplicaAssignment, assignedTopic("empty-list", []int32{node}, []int32{}))
	refused(protocol.InvalidReplicaAssignment, assignedTopic("inconsistent", []int32{node}, []int32{node, node + 10}))
	gap := assignedTopic("gap", []int32{node}, []int32{node})
	gap.ReplicaAssignment[1].Partition = 2
	refused(protocol.InvalidReplicaAssignment, gap)
	counted := assignedTopic("counted", []int32{node})
	counted.NumPartitions = 1
	refused(protocol.InvalidPartitions, counted)
	factored := assignedTopic("factored", []int32{node})
	factored.ReplicationFactor = 1
	refused(protocol.InvalidReplicationFactor, factored)

	wantCode(t, "grow by hand", growTopic(c, "assigned-v7", 5, []int32{node}, []int32{node}), protocol.None)
	if partitions, _ := c.topicPartitions("assigned-v7"); partitions != 5 {
		t.Fatalf("after growing: %d partitions", partitions)
	}
	wantCode(t, "fewer lists than new partitions", growTopic(c, "assigned-v7", 7, []int32{node}), protocol.InvalidReplicaAssignment)
	wantCode(t, "unknown broker", growTopic(c, "assigned-v7", 6, []int32{node + 10}), protocol.InvalidReplicaAssignment)
	wantCode(t, "replication factor", growTopic(c, "assigned-v7", 6, []int32{node, node + 10}), protocol.InvalidReplicaAssignment)
	wantCode(t, "unknown topic", growTopic(c, "nowhere", 2, []int32{node}), protocol.UnknownTopicOrPartition)
	if partitions, _ := c.topicPartitions("assigned-v7"); partitions != 5 {
		t.Fatalf("after refusals: %d partitions", partitions)
	}
}
