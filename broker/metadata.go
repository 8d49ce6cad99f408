package broker

// Metadata v0-v12: brokers with their advertised addresses, cluster id, controller id, and topics
// with partitions, leaders, leader epochs, replicas and ISR. Unknown topics are created when the
// broker allows auto-creation and the request does (always for v0-v3); otherwise they answer
// UNKNOWN_TOPIC_OR_PARTITION, and invalid names INVALID_TOPIC_EXCEPTION. Lookups by topic id alone
// (v10+, null name) answer UNKNOWN_TOPIC_ID unless the id is known. A partition whose log could not be
// opened on this node is listed with KAFKA_STORAGE_ERROR, leader -1 and this node offline. __consumer_offsets is listed (with
// all topics, or by name) as an internal topic of one partition led by this broker, because tools
// look for it; it is not a log: committed offsets live in the Raft coordinator, producing to it
// answers INVALID_TOPIC_EXCEPTION and fetching UNKNOWN_TOPIC_OR_PARTITION.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

// metadataCreateTimeout bounds how long a Metadata request waits for an auto-created topic.
const metadataCreateTimeout = 10 * time.Second

func (b *Broker) handleMetadata(r *request, req *kmsg.MetadataRequest) {
	meta := b.coordinator.Metadata()
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, id := range meta.LiveBrokerIDs() {
		broker := meta.Brokers[id]
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID = broker.NodeID
		rb.Host, rb.Port = b.endpointFor(r, broker)
		if broker.Rack != "" {
			rack := broker.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	clusterID := meta.ClusterID
	resp.ClusterID = &clusterID
	resp.ControllerID = meta.ControllerID

	allTopics := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if allTopics {
		resp.Topics = append(resp.Topics, b.consumerOffsetsMetadata())
		for _, name := range meta.TopicNames() {
			resp.Topics = append(resp.Topics, b.localTopicMetadata(meta.Topics[name]))
		}
		r.respond(resp)
		return
	}
	autoCreate := b.config.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			resp.Topics = append(resp.Topics, b.topicByID(meta, rt.TopicID))
			continue
		}
		name := *rt.Topic
		if name == coordinator.ConsumerOffsetsTopic {
			resp.Topics = append(resp.Topics, b.consumerOffsetsMetadata())
			continue
		}
		if t, ok := meta.Topics[name]; ok {
			resp.Topics = append(resp.Topics, b.localTopicMetadata(t))
			continue
		}
		resp.Topics = append(resp.Topics, b.autoCreate(name, autoCreate))
	}
	r.respond(resp)
}

func (b *Broker) topicByID(meta *coordinator.Metadata, id [16]byte) kmsg.MetadataResponseTopic {
	for _, t := range meta.Topics {
		if t.ID == id {
			return b.localTopicMetadata(t)
		}
	}
	rt := kmsg.NewMetadataResponseTopic()
	rt.TopicID = id
	rt.ErrorCode = protocol.UnknownTopicID.Code
	return rt
}

// autoCreate creates a topic a Metadata request named, if allowed, and describes it.
func (b *Broker) autoCreate(name string, allowed bool) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	topicName := name
	rt.Topic = &topicName
	if err := coordinator.ValidateTopicName(name); err != nil || coordinator.IsInternalTopicName(name) {
		rt.ErrorCode = protocol.InvalidTopicException.Code
		return rt
	}
	if !allowed {
		rt.ErrorCode = protocol.UnknownTopicOrPartition.Code
		return rt
	}
	ctx, cancel := context.WithTimeout(context.Background(), metadataCreateTimeout)
	defer cancel()
	_, err := b.coordinator.CreateTopic(ctx, name, b.config.DefaultPartitions, b.config.DefaultReplicationFactor, nil, false)
	if err != nil && !errors.Is(err, coordinator.ErrTopicExists) {
		b.logger.Warn("auto-create topic", "topic", name, "err", err)
		rt.ErrorCode = adminErrorCode(err)
		if rt.ErrorCode == protocol.UnknownServerError.Code {
			rt.ErrorCode = protocol.LeaderNotAvailable.Code // retriable: the client asks again
		}
		return rt
	}
	meta := b.coordinator.Metadata()
	if err := b.registry.waitVersion(ctx, meta.Version); err != nil {
		rt.ErrorCode = protocol.LeaderNotAvailable.Code
		return rt
	}
	if t, ok := meta.Topics[name]; ok {
		return b.localTopicMetadata(t)
	}
	rt.ErrorCode = protocol.LeaderNotAvailable.Code
	return rt
}

// consumerOffsetsMetadata describes the internal __consumer_offsets topic: one partition, on this
// broker, the group coordinator.
func (b *Broker) consumerOffsetsMetadata() kmsg.MetadataResponseTopic {
	node := b.config.NodeID
	return topicMetadata(&coordinator.Topic{
		Name:       coordinator.ConsumerOffsetsTopic,
		Internal:   true,
		Partitions: []coordinator.Partition{{Index: 0, Leader: node, Replicas: []int32{node}, ISR: []int32{node}}},
	})
}

// localTopicMetadata describes t as this node sees it: partitions whose log failed to open here are
// offline (partition_offline.go).
func (b *Broker) localTopicMetadata(t *coordinator.Topic) kmsg.MetadataResponseTopic {
	rt := topicMetadata(t)
	b.registry.offline.markOffline(&rt, b.config.NodeID)
	// Replicas on fenced (or unregistered) brokers are offline replicas (Metadata v5+).
	brokers := b.coordinator.Metadata().Brokers
	for i := range rt.Partitions {
		for _, id := range rt.Partitions[i].Replicas {
			if broker, ok := brokers[id]; !ok || broker.Fenced {
				rt.Partitions[i].OfflineReplicas = append(rt.Partitions[i].OfflineReplicas, id)
			}
		}
	}
	return rt
}

func topicMetadata(t *coordinator.Topic) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	rt.Topic = &name
	rt.TopicID = t.ID
	rt.IsInternal = t.Internal
	for _, p := range t.Partitions {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = p.Index
		rp.Leader = p.Leader
		rp.LeaderEpoch = p.LeaderEpoch
		rp.Replicas = slices.Clone(p.Replicas)
		rp.ISR = slices.Clone(p.ISR)
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// adminErrorCode is the Kafka code for an admin request's error: a protocol code carried in the
// error chain, else the code for the coordinator's error class.
func adminErrorCode(err error) int16 {
	if code := protocol.CodeFor(err); code != protocol.UnknownServerError.Code {
		return code
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, coordinator.ErrTopicExists):
		return protocol.TopicAlreadyExists.Code
	case errors.Is(err, coordinator.ErrUnknownTopic):
		return protocol.UnknownTopicOrPartition.Code
	case errors.Is(err, coordinator.ErrInvalidTopicName):
		return protocol.InvalidTopicException.Code
	case errors.Is(err, coordinator.ErrReservedTopic), errors.Is(err, coordinator.ErrInvalidBroker):
		return protocol.InvalidRequest.Code
	case errors.Is(err, coordinator.ErrInvalidPartitions):
		return protocol.InvalidPartitions.Code
	case errors.Is(err, coordinator.ErrInvalidReplicaAssignment):
		return protocol.InvalidReplicaAssignment.Code
	case errors.Is(err, coordinator.ErrInvalidReplicationFactor):
		return protocol.InvalidReplicationFactor.Code
	case errors.Is(err, coordinator.ErrInvalidConfig):
		return protocol.InvalidConfig.Code
	case errors.Is(err, coordinator.ErrNotLeader):
		return protocol.NotController.Code
	case errors.Is(err, coordinator.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return protocol.RequestTimedOut.Code
	}
	return protocol.UnknownServerError.Code
}

func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	message := fmt.Sprint(err)
	return &message
}
