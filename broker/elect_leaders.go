package broker

// ElectLeaders v0-v2: preferred-leader election through the controller (election type 0). Each named
// partition is answered with its outcome: none (elected), ELECTION_NOT_NEEDED (the preferred replica
// already leads), PREFERRED_LEADER_NOT_AVAILABLE (it is fenced or out of sync) or
// UNKNOWN_TOPIC_OR_PARTITION. A null topic list means every partition, and then partitions that
// needed no election are left out of the answer, as Kafka does. Unclean election (type 1) is
// refused per partition with INVALID_REQUEST: sluice elects out-of-sync replicas only where a
// topic's unclean.leader.election.enable allows it, when no in-sync replica is live.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleElectLeaders(r *request, req *kmsg.ElectLeadersRequest) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	ctx, cancel := adminContext(req.TimeoutMillis)
	defer cancel()
	all := req.Topics == nil
	var named []coordinator.TopicPartition
	if all {
		meta := b.coordinator.Metadata()
		for name, topic := range meta.Topics {
			for _, p := range topic.Partitions {
				named = append(named, coordinator.TopicPartition{Topic: name, Partition: p.Index})
			}
		}
	} else {
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				named = append(named, coordinator.TopicPartition{Topic: rt.Topic, Partition: p})
			}
		}
	}
	results := map[coordinator.TopicPartition]error{}
	switch {
	case req.ElectionType != 0:
		for _, tp := range named {
			results[tp] = fmt.Errorf("broker: election type %d: only preferred-leader election (0) is served: %w", req.ElectionType, protocol.InvalidRequest)
		}
	case len(named) > 0:
		elected, err := b.coordinator.ElectPreferredLeaders(ctx, named)
		if err != nil {
			// The whole request failed (no controller, timeout): v1+ carry it at the top level,
			// v0 per partition.
			resp.ErrorCode = adminErrorCode(err)
			for _, tp := range named {
				results[tp] = err
			}
			break
		}
		results = elected
	}
	byTopic := map[string]*kmsg.ElectLeadersResponseTopic{}
	var order []string
	anyError := false
	for _, tp := range named {
		err := results[tp]
		if all && errors.Is(err, coordinator.ErrElectionNotNeeded) {
			continue
		}
		topic, ok := byTopic[tp.Topic]
		if !ok {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = tp.Topic
			topic = &t
			byTopic[tp.Topic] = topic
			order = append(order, tp.Topic)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = tp.Partition
		if err != nil {
			rp.ErrorCode = electionErrorCode(err)
			rp.ErrorMessage = errorMessage(err)
			anyError = true
		}
		topic.Partitions = append(topic.Partitions, rp)
	}
	slices.Sort(order)
	for _, name := range order {
		resp.Topics = append(resp.Topics, *byTopic[name])
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}

func electionErrorCode(err error) int16 {
	switch {
	case errors.Is(err, coordinator.ErrElectionNotNeeded):
		return protocol.ElectionNotNeeded.Code
	case errors.Is(err, coordinator.ErrPreferredLeaderNotAvailable):
		return protocol.PreferredLeaderNotAvailable.Code
	}
	return adminErrorCode(err)
}
