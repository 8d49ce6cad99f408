package client

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The "consumer" protocol type's bytes (Kafka's ConsumerProtocol), as other clients write them,
// all big-endian:
//
// Subscription (JoinGroup protocol metadata), version 3:
//
//	| field           | encoding                                   | versions |
//	|-----------------|--------------------------------------------|----------|
//	| version         | int16                                      | 0+       |
//	| topics          | int32 count, then int16-length strings     | 0+       |
//	| user data       | int32-length bytes, -1 for null            | 0+       |
//	| owned           | int32 count of (topic, int32 count, int32s) | 1+       |
//	| generation      | int32, -1 when none                        | 2+       |
//	| rack            | int16-length string, -1 for null           | 3+       |
//
// Assignment (SyncGroup member assignment): version int16, then topics as int32 count of (topic,
// int32 count, int32 partitions), then user data as int32-length bytes.
//
// Cooperative-sticky members also put a StickyMemberMetadata in user data (their current
// assignment and generation), as Java's sticky assignor and franz-go do, for leaders reading
// subscriptions older than version 2.

// subscriptionVersion is the ConsumerProtocol subscription version this client writes.
const subscriptionVersion = 3

// encodeSubscription returns the protocol metadata for JoinGroup.
func encodeSubscription(b Balancer, topics []string, owned []TopicPartition, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = subscriptionVersion
	meta.Topics = slices.Sorted(slices.Values(topics))
	meta.Generation = generation
	if b.cooperative {
		sticky := kmsg.NewStickyMemberMetadata()
		sticky.Generation = generation
		for _, group := range groupByTopic(owned) {
			ownedTopic := kmsg.NewConsumerMemberMetadataOwnedPartition()
			ownedTopic.Topic, ownedTopic.Partitions = group.topic, group.partitions
			meta.OwnedPartitions = append(meta.OwnedPartitions, ownedTopic)
			current := kmsg.NewStickyMemberMetadataCurrentAssignment()
			current.Topic, current.Partitions = group.topic, group.partitions
			sticky.CurrentAssignment = append(sticky.CurrentAssignment, current)
		}
		meta.UserData = sticky.AppendTo(nil)
	}
	return meta.AppendTo(nil)
}

// decodeSubscription reads a member's protocol metadata. Topics come back sorted and without
// duplicates. The generation is the version 2 field, or the sticky user data's for older
// versions, or -1.
func decodeSubscription(memberID, instanceID string, metadata []byte) (groupMember, error) {
	meta := kmsg.NewConsumerMemberMetadata()
	if err := meta.ReadFrom(metadata); err != nil {
		// Some clients claim version 1 without writing the owned partitions; read such as v0.
		if !bytes.HasPrefix(metadata, []byte{0, 1}) {
			return groupMember{}, fmt.Errorf("%w: member %q subscription: %w", ErrMalformed, memberID, err)
		}
		patched := append([]byte{0, 0}, metadata[2:]...)
		meta = kmsg.NewConsumerMemberMetadata()
		if err := meta.ReadFrom(patched); err != nil {
			return groupMember{}, fmt.Errorf("%w: member %q subscription: %w", ErrMalformed, memberID, err)
		}
	}
	m := groupMember{memberID: memberID, instanceID: instanceID, generation: -1}
	m.topics = slices.Compact(slices.Sorted(slices.Values(meta.Topics)))
	for _, owned := range meta.OwnedPartitions {
		for _, p := range owned.Partitions {
			m.owned = append(m.owned, TopicPartition{owned.Topic, p})
		}
	}
	if meta.Version >= 2 {
		m.generation = meta.Generation
	}
	if meta.Version < 2 && len(meta.UserData) > 0 {
		sticky := kmsg.NewStickyMemberMetadata()
		if sticky.ReadFrom(meta.UserData) == nil {
			m.generation = sticky.Generation
			if meta.Version < 1 { // no owned field: the sticky user data says what it owns
				for _, current := range sticky.CurrentAssignment {
					for _, p := range current.Partitions {
						m.owned = append(m.owned, TopicPartition{current.Topic, p})
					}
				}
			}
		}
	}
	slices.SortFunc(m.owned, compareTopicPartitions)
	m.owned = slices.Compact(m.owned)
	return m, nil
}

// encodeAssignment returns one member's SyncGroup assignment (version 0).
func encodeAssignment(partitions []TopicPartition) []byte {
	assignment := kmsg.NewConsumerMemberAssignment()
	for _, group := range groupByTopic(partitions) {
		topic := kmsg.NewConsumerMemberAssignmentTopic()
		topic.Topic, topic.Partitions = group.topic, group.partitions
		assignment.Topics = append(assignment.Topics, topic)
	}
	return assignment.AppendTo(nil)
}

// decodeAssignment reads the assignment SyncGroup handed this member: sorted, without duplicates.
// An empty byte string is an empty assignment.
func decodeAssignment(raw []byte) ([]TopicPartition, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	assignment := kmsg.NewConsumerMemberAssignment()
	if err := assignment.ReadFrom(raw); err != nil {
		return nil, fmt.Errorf("%w: group assignment: %w", ErrMalformed, err)
	}
	var out []TopicPartition
	for _, topic := range assignment.Topics {
		for _, p := range topic.Partitions {
			out = append(out, TopicPartition{topic.Topic, p})
		}
	}
	slices.SortFunc(out, compareTopicPartitions)
	return slices.Compact(out), nil
}

type topicPartitions struct {
	topic      string
	partitions []int32
}

// groupByTopic groups partitions by topic, topics and partitions sorted.
func groupByTopic(partitions []TopicPartition) []topicPartitions {
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, compareTopicPartitions)
	var out []topicPartitions
	for _, tp := range sorted {
		if len(out) == 0 || out[len(out)-1].topic != tp.Topic {
			out = append(out, topicPartitions{topic: tp.Topic})
		}
		last := &out[len(out)-1]
		last.partitions = append(last.partitions, tp.Partition)
	}
	return out
}
