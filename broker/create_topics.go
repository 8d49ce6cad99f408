package broker

// CreateTopics v0-v7: creates topics through the coordinator (Raft) and answers once this broker has
// opened their logs. num_partitions and replication_factor of -1 take the broker defaults; v5+
// answers carry the partition count, replication factor and configs. Refusals: existing topic
// TOPIC_ALREADY_EXISTS, bad name INVALID_TOPIC_EXCEPTION, count <= 0 INVALID_PARTITIONS, replication
// factor <= 0 or above the broker count INVALID_REPLICATION_FACTOR, unknown or bad config
// INVALID_CONFIG, topics named twice INVALID_REQUEST, a node that is not the controller
// NOT_CONTROLLER. Manual replica assignments are served (num_partitions and replication_factor must
// then be -1, else INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, as in Kafka's controller):
// partition indexes must run 0..n-1, and each list be non-empty, of one length, without a broker
// twice, naming registered brokers only, at least one of them live; otherwise
// INVALID_REPLICA_ASSIGNMENT. A topic created whose log this node could not open for some
// partition (EMFILE, ENOSPC...) answers KAFKA_STORAGE_ERROR naming the partitions; the topic exists
// and the broker retries opening them.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleCreateTopics(r *request, req *kmsg.CreateTopicsRequest) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := adminContext(req.TimeoutMillis)
	defer cancel()
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	anyError := false
	for _, rt := range req.Topics {
		result := kmsg.NewCreateTopicsResponseTopic()
		result.Topic = rt.Topic
		err := b.createTopic(ctx, rt, req.ValidateOnly, seen[rt.Topic] > 1, &result)
		if err != nil {
			result.ErrorCode = adminErrorCode(err)
			result.ErrorMessage = errorMessage(err)
			result.NumPartitions, result.ReplicationFactor = -1, -1
			anyError = true
		}
		resp.Topics = append(resp.Topics, result)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) createTopic(ctx context.Context, rt kmsg.CreateTopicsRequestTopic, validateOnly, duplicate bool, result *kmsg.CreateTopicsResponseTopic) error {
	if duplicate {
		return fmt.Errorf("broker: topic %q named more than once: %w", rt.Topic, protocol.InvalidRequest)
	}
	partitions, replication := rt.NumPartitions, rt.ReplicationFactor
	if partitions == -1 {
		partitions = b.config.DefaultPartitions
	}
	if replication == -1 {
		replication = b.config.DefaultReplicationFactor
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		if c.Value == nil {
			return fmt.Errorf("broker: config %s has a null value: %w", c.Name, protocol.InvalidConfig)
		}
		configs[c.Name] = *c.Value
	}
	var topic *coordinator.Topic
	var err error
	if len(rt.ReplicaAssignment) > 0 {
		assignments, manualErr := manualTopicAssignments(rt)
		if manualErr != nil {
			return manualErr
		}
		topic, err = b.coordinator.CreateTopicWithAssignments(ctx, rt.Topic, assignments, configs, validateOnly)
	} else {
		topic, err = b.coordinator.CreateTopic(ctx, rt.Topic, partitions, replication, configs, validateOnly)
	}
	if err != nil {
		return err
	}
	if !validateOnly {
		result.TopicID = topic.ID
		if err := b.registry.waitVersion(ctx, b.coordinator.Metadata().Version); err != nil {
			return fmt.Errorf("%w: %w", protocol.RequestTimedOut, err)
		}
		// The topic exists now, but a partition this node could not open a log for would take
		// produces it cannot store: say so (partition_offline.go retries in the background).
		if err := b.registry.offline.topicError(topic.Name, topic.ID, b.config.NodeID); err != nil {
			return err
		}
	}
	result.NumPartitions = int32(len(topic.Partitions))
	result.ReplicationFactor = int16(topic.ReplicationFactor())
	for _, entry := range b.topicConfigEntries(topic.Configs, nil) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.ReadOnly, c.Source = entry.name, &entry.value, false, entry.source
		result.Configs = append(result.Configs, c)
	}
	return nil
}

// manualTopicAssignments orders a CreateTopics request's replica assignments by partition and checks
// what the coordinator cannot see: the counts left at -1 and the partition indexes 0..n-1.
func manualTopicAssignments(rt kmsg.CreateTopicsRequestTopic) ([][]int32, error) {
	if rt.ReplicationFactor != -1 {
		return nil, fmt.Errorf("broker: topic %q has a manual partition assignment, but replication factor %d, not -1: %w",
			rt.Topic, rt.ReplicationFactor, protocol.InvalidReplicationFactor)
	}
	if rt.NumPartitions != -1 {
		return nil, fmt.Errorf("broker: topic %q has a manual partition assignment, but %d partitions, not -1: %w",
			rt.Topic, rt.NumPartitions, protocol.InvalidPartitions)
	}
	assignments := make([][]int32, len(rt.ReplicaAssignment))
	for _, a := range rt.ReplicaAssignment {
		if a.Partition < 0 || int(a.Partition) >= len(assignments) || assignments[a.Partition] != nil {
			return nil, fmt.Errorf("broker: topic %q: assigned partitions must run 0..%d, each once (partition %d): %w",
				rt.Topic, len(assignments)-1, a.Partition, protocol.InvalidReplicaAssignment)
		}
		assignments[a.Partition] = append([]int32{}, a.Replicas...)
	}
	return assignments, nil
}

// adminContext bounds an admin request by its timeout (at least a second, at most a minute).
func adminContext(timeoutMillis int32) (context.Context, context.CancelFunc) {
	timeout := time.Duration(timeoutMillis) * time.Millisecond
	timeout = min(max(timeout, time.Second), time.Minute)
	return context.WithTimeout(context.Background(), timeout)
}
