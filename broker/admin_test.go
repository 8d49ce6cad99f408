package broker

// Topic administration over a real socket: CreateTopics, DeleteTopics, CreatePartitions and
// DescribeCluster, with the refusals each documents.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// startAdminBroker starts a broker without auto-creation, so that Metadata tells whether a topic
// exists, and with two default partitions, so that defaults are visible.
func startAdminBroker(t *testing.T) (*Broker, *testConn) {
	t.Helper()
	b := startBroker(t, func(cfg *Config) {
		cfg.AutoCreateTopics = false
		cfg.DefaultPartitions = 2
	})
	return b, dial(t, b)
}

// topicNames lists every topic (all-topics Metadata).
func (c *testConn) topicNames() []string {
	c.t.Helper()
	var names []string
	for _, topic := range roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, false)).Topics {
		if topic.IsInternal {
			continue // __consumer_offsets is always listed
		}
		names = append(names, deref(topic.Topic).(string))
	}
	return names
}

// topicPartitions asks Metadata whether name exists and returns its partition count.
func (c *testConn) topicPartitions(name string) (int, bool) {
	c.t.Helper()
	topic := onlyTopic(c.t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, false, name)))
	switch topic.ErrorCode {
	case 0:
		return len(topic.Partitions), true
	case protocol.UnknownTopicOrPartition.Code:
		return 0, false
	}
	c.t.Fatalf("metadata for %q: error %d", name, topic.ErrorCode)
	return 0, false
}

func TestCreateTopics(t *testing.T) {
	_, c := startAdminBroker(t)

	create := func(c *testConn, version int16, topics ...kmsg.CreateTopicsRequestTopic) []kmsg.CreateTopicsResponseTopic {
		t := c.t
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		req.TimeoutMillis = 10_000
		req.Topics = topics
		resp := roundTrip[*kmsg.CreateTopicsResponse](c, req)
		if len(resp.Topics) != len(topics) {
			t.Fatalf("v%d: %d results for %d topics", version, len(resp.Topics), len(topics))
		}
		return resp.Topics
	}
	topic := func(name string, partitions int32, replication int16, configs ...string) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, replication
		for i := 0; i+1 < len(configs); i += 2 {
			config := kmsg.NewCreateTopicsRequestTopicConfig()
			config.Name, config.Value = configs[i], kmsg.StringPtr(configs[i+1])
			rt.Configs = append(rt.Configs, config)
		}
		return rt
	}
	refused := func(t *testing.T, want protocol.ErrorCode, rt kmsg.CreateTopicsRequestTopic) {
		c := c.in(t)
		t.Helper()
		for _, version := range []int16{0, 4, 7} {
			result := create(c, version, rt)[0]
			if result.ErrorCode != want.Code || result.Topic != rt.Topic {
				t.Errorf("v%d create %q: error %d, want %d %s", version, rt.Topic, result.ErrorCode, want.Code, want.Name)
			}
			if version >= 1 && result.ErrorMessage == nil {
				t.Errorf("v%d create %q: no error message", version, rt.Topic)
			}
		}
		if want != protocol.TopicAlreadyExists && slices.Contains(c.topicNames(), rt.Topic) {
			t.Errorf("refused topic %q exists", rt.Topic)
		}
	}

	t.Run("created at every version", func(t *testing.T) {
		c := c.in(t)
		for version := int16(0); version <= 7; version++ {
			name := "created-v" + string(rune('0'+version))
			result := create(c, version, topic(name, 3, 1, "retention.ms", "3600000"))[0]
			if result.ErrorCode != 0 || result.Topic != name {
				t.Fatalf("v%d: %+v", version, result)
			}
			if partitions, exists := c.topicPartitions(name); !exists || partitions != 3 {
				t.Fatalf("v%d: topic has %d partitions (exists %v), want 3", version, partitions, exists)
			}
			if version < 5 {
				continue
			}
			if result.NumPartitions != 3 || result.ReplicationFactor != 1 {
				t.Errorf("v%d: partitions %d, replication factor %d", version, result.NumPartitions, result.ReplicationFactor)
			}
			configs := map[string]kmsg.CreateTopicsResponseTopicConfig{}
			for _, config := range result.Configs {
				configs[config.Name] = config
			}
			if retention := configs["retention.ms"]; deref(retention.Value) != "3600000" || kmsg.ConfigSource(retention.Source) != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("v%d: retention.ms %+v, want the override", version, retention)
			}
			if policy := configs["cleanup.policy"]; deref(policy.Value) != "delete" || kmsg.ConfigSource(policy.Source) != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("v%d: cleanup.policy %+v, want the default", version, policy)
			}
			if version >= 7 && result.TopicID == [16]byte{} {
				t.Errorf("v%d: zero topic id", version)
			}
		}
	})
	t.Run("-1 takes the broker defaults", func(t *testing.T) {
		c := c.in(t)
		result := create(c, 7, topic("defaults", -1, -1))[0]
		if result.ErrorCode != 0 || result.NumPartitions != 2 || result.ReplicationFactor != 1 {
			t.Fatalf("%+v, want 2 partitions and replication factor 1", result)
		}
	})
	t.Run("partition count", func(t *testing.T) {
		for _, count := range []int32{0, -2, -100} {
			refused(t, protocol.InvalidPartitions, topic("bad-count", count, 1))
		}
	})
	t.Run("replication factor", func(t *testing.T) {
		for _, factor := range []int16{3, 2, 0, -2} {
			refused(t, protocol.InvalidReplicationFactor, topic("bad-replication", 1, factor))
		}
	})
	t.Run("existing topic", func(t *testing.T) {
		c := c.in(t)
		c.createTopic("existing", 1, nil)
		refused(t, protocol.TopicAlreadyExists, topic("existing", 4, 1))
		if partitions, _ := c.topicPartitions("existing"); partitions != 1 {
			t.Fatalf("existing topic now has %d partitions", partitions)
		}
	})
	t.Run("invalid names", func(t *testing.T) {
		for _, name := range []string{"bad/name", strings.Repeat("n", 250), "", ".", "..", "tab\there"} {
			refused(t, protocol.InvalidTopicException, topic(name, 1, 1))
		}
	})
	t.Run("configs", func(t *testing.T) {
		bad := [][2]string{
			{"retention.ms", "a week"},
			{"retention.ms", "-2"},
			{"segment.bytes", "10"},
			{"cleanup.policy", "compress"},
			{"compression.type", "brotli"},
			{"no.such.config", "1"},
		}
		for _, config := range bad {
			refused(t, protocol.InvalidConfig, topic("bad-config", 1, 1, config[0], config[1]))
		}
		rt := topic("null-config", 1, 1)
		config := kmsg.NewCreateTopicsRequestTopicConfig()
		config.Name = "retention.ms" // null value
		rt.Configs = append(rt.Configs, config)
		refused(t, protocol.InvalidConfig, rt)
	})
	t.Run("internal topic", func(t *testing.T) {
		refused(t, protocol.InvalidRequest, topic("__consumer_offsets", 50, 1))
	})
	t.Run("duplicates", func(t *testing.T) {
		c := c.in(t)
		results := create(c, 7, topic("twice", 1, 1), topic("twice", 2, 1), topic("once", 1, 1))
		if results[0].ErrorCode != protocol.InvalidRequest.Code || results[1].ErrorCode != protocol.InvalidRequest.Code || results[2].ErrorCode != 0 {
			t.Fatalf("twice, twice, once: %+v", results)
		}
		if _, exists := c.topicPartitions("twice"); exists {
			t.Fatal("a topic named twice was created")
		}
	})
	t.Run("validate only", func(t *testing.T) {
		c := c.in(t)
		for _, version := range []int16{1, 5, 7} {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.SetVersion(version)
			req.ValidateOnly = true
			req.Topics = []kmsg.CreateTopicsRequestTopic{topic("dry-run", 4, 1, "retention.ms", "1000"), topic("dry/run", 1, 1)}
			resp := roundTrip[*kmsg.CreateTopicsResponse](c, req)
			if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != protocol.InvalidTopicException.Code {
				t.Fatalf("v%d: %+v", version, resp.Topics)
			}
			if version >= 5 && (resp.Topics[0].NumPartitions != 4 || resp.Topics[0].ReplicationFactor != 1) {
				t.Errorf("v%d: validate-only answer %+v, want 4 partitions", version, resp.Topics[0])
			}
			if _, exists := c.topicPartitions("dry-run"); exists {
				t.Fatalf("v%d: validate_only created the topic", version)
			}
		}
	})
}

func TestDeleteTopics(t *testing.T) {
	b, c := startAdminBroker(t)

	deleteByName := func(c *testConn, version int16, names ...string) []kmsg.DeleteTopicsResponseTopic {
		c.t.Helper()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(version)
		req.TimeoutMillis = 10_000
		if version >= 6 {
			for _, name := range names {
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
		} else {
			req.TopicNames = names
		}
		return roundTrip[*kmsg.DeleteTopicsResponse](c, req).Topics
	}
	deleteByID := func(c *testConn, id [16]byte) kmsg.DeleteTopicsResponseTopic {
		t := c.t
		t.Helper()
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(6)
		req.TimeoutMillis = 10_000
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
		topics := roundTrip[*kmsg.DeleteTopicsResponse](c, req).Topics
		if len(topics) != 1 {
			t.Fatalf("delete by id: %d results", len(topics))
		}
		return topics[0]
	}
	gone := func(t *testing.T, name string) {
		c := c.in(t)
		t.Helper()
		if _, exists := c.topicPartitions(name); exists {
			t.Fatalf("%q still in metadata", name)
		}
		if result := c.produce(name, 0, recordBatch(batchTime, "too late")); result.ErrorCode != protocol.UnknownTopicOrPartition.Code {
			t.Fatalf("produce to deleted %q: error %d, want 3", name, result.ErrorCode)
		}
		if result := c.fetchPartition(fetchRequest(12, name, 0, 0, 1<<20)); result.ErrorCode != protocol.UnknownTopicOrPartition.Code {
			t.Fatalf("fetch from deleted %q: error %d, want 3", name, result.ErrorCode)
		}
		dir := b.registry.partitionDir(name, 0)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("log directory of deleted %q: %v", name, err)
		}
		// The files go in the background, after the directory was moved aside.
		await(t, "the deleted log's files to be removed", func() bool {
			aside, err := filepath.Glob(dir + ".deleted-*")
			return err == nil && len(aside) == 0 && b.registry.trash.Pending() == 0
		})
	}
	recreated := func(t *testing.T, name string) {
		c := c.in(t)
		t.Helper()
		c.createTopic(name, 1, nil)
		if offset := c.mustProduce(name, 0, recordBatch(batchTime, "reborn")); offset != 0 {
			t.Fatalf("first produce to recreated %q at offset %d, want 0", name, offset)
		}
		assertRecords(t, c.readAll(name, 0), "reborn")
	}

	for _, version := range []int16{0, 1, 4, 5, 6} {
		name := "doomed-by-name"
		c.createTopic(name, 1, nil)
		c.mustProduce(name, 0, recordBatch(batchTime, "old", "data"))
		results := deleteByName(c, version, name)
		if len(results) != 1 || results[0].ErrorCode != 0 || deref(results[0].Topic) != name {
			t.Fatalf("v%d delete %q: %+v", version, name, results)
		}
		gone(t, name)
		recreated(t, name)
		if results := deleteByName(c, version, name); results[0].ErrorCode != 0 {
			t.Fatalf("v%d delete recreated %q: error %d", version, name, results[0].ErrorCode)
		}
	}

	t.Run("v6 by id", func(t *testing.T) {
		c := c.in(t)
		created := roundTrip[*kmsg.CreateTopicsResponse](c, createTopicRequest("doomed-by-id", 2, nil)).Topics[0]
		if created.ErrorCode != 0 || created.TopicID == [16]byte{} {
			t.Fatalf("create: %+v", created)
		}
		c.mustProduce("doomed-by-id", 1, recordBatch(batchTime, "old"))
		result := deleteByID(c, created.TopicID)
		if result.ErrorCode != 0 || deref(result.Topic) != "doomed-by-id" || result.TopicID != created.TopicID {
			t.Fatalf("delete by id: %+v", result)
		}
		gone(t, "doomed-by-id")
		if result := deleteByID(c, created.TopicID); result.ErrorCode != protocol.UnknownTopicID.Code {
			t.Fatalf("delete the same id again: error %d, want 100 UNKNOWN_TOPIC_ID", result.ErrorCode)
		}
		recreated(t, "doomed-by-id")
	})
	t.Run("unknown topics", func(t *testing.T) {
		c := c.in(t)
		for _, version := range []int16{0, 5, 6} {
			if results := deleteByName(c, version, "never-existed"); results[0].ErrorCode != protocol.UnknownTopicOrPartition.Code {
				t.Errorf("v%d: error %d, want 3", version, results[0].ErrorCode)
			}
		}
	})
	t.Run("one failure does not stop the others", func(t *testing.T) {
		c := c.in(t)
		c.createTopic("batch-a", 1, nil)
		c.createTopic("batch-b", 1, nil)
		results := deleteByName(c, 5, "batch-a", "never-existed", "batch-b")
		if results[0].ErrorCode != 0 || results[1].ErrorCode != protocol.UnknownTopicOrPartition.Code || results[2].ErrorCode != 0 {
			t.Fatalf("%+v", results)
		}
		gone(t, "batch-a")
		gone(t, "batch-b")
	})
	assertServing(t, b)
}

func TestCreatePartitions(t *testing.T) {
	_, c := startAdminBroker(t)
	c.createTopic("growing", 3, nil)
	c.mustProduce("growing", 2, recordBatch(batchTime, "before"))

	grow := func(version int16, validateOnly bool, name string, count int32) kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.SetVersion(version)
		req.TimeoutMillis = 10_000
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		req.Topics = append(req.Topics, rt)
		resp := roundTrip[*kmsg.CreatePartitionsResponse](c, req)
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != name {
			t.Fatalf("v%d: %+v", version, resp.Topics)
		}
		return resp.Topics[0]
	}

	if result := grow(1, true, "growing", 6); result.ErrorCode != 0 {
		t.Fatalf("validate only 3 -> 6: error %d", result.ErrorCode)
	}
	if partitions, _ := c.topicPartitions("growing"); partitions != 3 {
		t.Fatalf("validate only changed the count to %d", partitions)
	}
	if result := grow(3, false, "growing", 5); result.ErrorCode != 0 {
		t.Fatalf("3 -> 5: error %d (%v)", result.ErrorCode, deref(result.ErrorMessage))
	}
	if partitions, _ := c.topicPartitions("growing"); partitions != 5 {
		t.Fatalf("after 3 -> 5: %d partitions", partitions)
	}
	for _, partition := range []int32{3, 4} {
		if offset := c.mustProduce("growing", partition, recordBatch(batchTime, "new partition")); offset != 0 {
			t.Fatalf("first produce to new partition %d at %d", partition, offset)
		}
		assertRecords(t, c.readAll("growing", partition), "new partition")
	}
	assertRecords(t, c.readAll("growing", 2), "before")

	for _, version := range []int16{0, 3} {
		for _, count := range []int32{4, 5, 0, -1} {
			if result := grow(version, false, "growing", count); result.ErrorCode != protocol.InvalidPartitions.Code {
				t.Errorf("v%d 5 -> %d: error %d, want 37 INVALID_PARTITIONS", version, count, result.ErrorCode)
			}
		}
		if result := grow(version, false, "never-existed", 2); result.ErrorCode != protocol.UnknownTopicOrPartition.Code {
			t.Errorf("v%d unknown topic: error %d, want 3", version, result.ErrorCode)
		}
	}
	if partitions, _ := c.topicPartitions("growing"); partitions != 5 {
		t.Fatalf("after refusals: %d partitions", partitions)
	}

	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(3)
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "growing", 6
	assignment := kmsg.NewCreatePartitionsRequestTopicAssignment()
	assignment.Replicas = []int32{1}
	rt.Assignment = append(rt.Assignment, assignment)
	req.Topics = append(req.Topics, rt)
	if result := roundTrip[*kmsg.CreatePartitionsResponse](c, req).Topics[0]; result.ErrorCode != 0 {
		t.Errorf("manual assignment on this broker: error %d", result.ErrorCode)
	}
	if partitions, _ := c.topicPartitions("growing"); partitions != 6 {
		t.Fatalf("after a manual assignment: %d partitions", partitions)
	}
}

func TestDescribeCluster(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	metadata := roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, false))
	for _, version := range []int16{0, 1} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(version)
		req.EndpointType = 1
		resp := roundTrip[*kmsg.DescribeClusterResponse](c, req)
		if resp.ErrorCode != 0 || resp.ClusterID == "" || resp.ClusterID != deref(metadata.ClusterID) || resp.ControllerID != 1 {
			t.Fatalf("v%d: error %d, cluster %q (metadata says %v), controller %d", version, resp.ErrorCode, resp.ClusterID, deref(metadata.ClusterID), resp.ControllerID)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != metadata.Brokers[0].Host || resp.Brokers[0].Port != metadata.Brokers[0].Port {
			t.Fatalf("v%d: brokers %+v, metadata brokers %+v", version, resp.Brokers, metadata.Brokers)
		}
		if version >= 1 && resp.EndpointType != 1 {
			t.Fatalf("v%d: endpoint type %d", version, resp.EndpointType)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.SetVersion(1)
	req.EndpointType = 2 // controllers
	if resp := roundTrip[*kmsg.DescribeClusterResponse](c, req); resp.ErrorCode != protocol.UnsupportedVersion.Code || len(resp.Brokers) != 0 {
		t.Fatalf("v1 controllers: error %d, %d brokers; want 35 and none", resp.ErrorCode, len(resp.Brokers))
	}
}
