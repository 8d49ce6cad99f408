package broker

// DescribeShareGroupOffsets v0-v1, AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0
// (KIP-932 administration), answered by the group's coordinator from the share-partition state: the
// start offset (SPSO) and, from v1, the lag (records below the high watermark not yet acknowledged
// or archived; -1 where this broker holds no replica to read the watermark from). A partition
// without state has start offset -1. Alter and delete need the group to have no members
// (NON_EMPTY_GROUP otherwise); alter replaces the partition's state with its new start offset and
// nothing in flight, delete forgets the group's state of whole topics; both return once written to
// the coordinator. A share partition led by another broker keeps its in-memory state there until
// its next load, so alter and delete are meant for groups at rest. Refusals: NOT_COORDINATOR,
// GROUP_ID_NOT_FOUND (not a share group), UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (a negative
// start offset).

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/share"
)

// shareGroupAdminCheck validates an administrative request about a share group.
func (b *Broker) shareGroupAdminCheck(group string, needEmpty bool) error {
	if group == "" {
		return fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	if err := b.checkCoordinator(group); err != nil {
		return err
	}
	if !b.shares.knownShareGroup(group) {
		return fmt.Errorf("broker: group %q is not a share group: %w", group, protocol.GroupIDNotFound)
	}
	if needEmpty {
		m := b.shares
		m.mu.Lock()
		e := m.groupLocked(group, false)
		members := 0
		if e != nil {
			members = len(e.group.Members())
		}
		m.mu.Unlock()
		if members > 0 {
			return fmt.Errorf("broker: share group %q has %d members: %w", group, members, protocol.NonEmptyGroup)
		}
	}
	return nil
}

// sharePartitionSummary is what describing a share partition reports.
type sharePartitionSummary struct {
	startOffset int64
	lag         int64
	inFlight    share.Summary
	known       bool
}

// describeSharePartition reads a share partition's state: in memory where this broker leads it,
// else as persisted.
func (b *Broker) describeSharePartition(group, topic string, partition int32) sharePartitionSummary {
	out := sharePartitionSummary{startOffset: -1, lag: -1}
	p, err := b.registry.partition(topic, partition)
	m := b.shares
	m.mu.Lock()
	e, loaded := m.mu.partitions[sharePartitionKey{group, topic, partition}]
	if loaded && err == nil && e.topicID == p.topicID {
		out.known, out.startOffset, out.inFlight = true, e.state.StartOffset(), e.state.Summary()
		out.lag = e.state.Lag(p.replica.HighWatermark())
		m.mu.Unlock()
		return out
	}
	m.mu.Unlock()
	saved, ok := b.coordinator.GroupState().SharePartition(group, topic, partition)
	if !ok {
		return out
	}
	out.known, out.startOffset = true, saved.StartOffset
	if err == nil && saved.TopicID == p.topicID {
		high := p.replica.HighWatermark()
		out.lag = max(high-saved.StartOffset, 0)
		for _, r := range saved.Ranges {
			if r.State != uint8(share.Available) && r.First < high {
				out.lag -= min(r.Last+1, high) - r.First
			}
		}
	}
	return out
}

func (b *Broker) handleDescribeShareGroupOffsets(r *request, req *kmsg.DescribeShareGroupOffsetsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	meta := b.coordinator.Metadata()
	anyError := false
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if err := b.shareGroupAdminCheck(rg.GroupID, false); err != nil {
			g.ErrorCode, g.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
			anyError = true
			resp.Groups = append(resp.Groups, g)
			continue
		}
		topics := rg.Topics
		if topics == nil { // every topic the group has state for
			byTopic := map[string][]int32{}
			for tp := range b.coordinator.GroupState().SharePartitions(rg.GroupID) {
				byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
			}
			for _, name := range slices.Sorted(maps.Keys(byTopic)) {
				t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
				t.Topic, t.Partitions = name, slices.Sorted(slices.Values(byTopic[name]))
				topics = append(topics, t)
			}
		}
		for _, rt := range topics {
			t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			t.Topic = rt.Topic
			topic, known := meta.Topics[rt.Topic]
			if known {
				t.TopicID = topic.ID
			}
			for _, partition := range rt.Partitions {
				p := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				p.Partition, p.StartOffset, p.LeaderEpoch, p.Lag = partition, -1, -1, -1
				if !known || partition < 0 || int(partition) >= len(topic.Partitions) {
					p.ErrorCode = protocol.UnknownTopicOrPartition.Code
					anyError = true
				} else {
					s := b.describeSharePartition(rg.GroupID, rt.Topic, partition)
					p.StartOffset, p.Lag = s.startOffset, s.lag
					p.LeaderEpoch = topic.Partitions[partition].LeaderEpoch
				}
				t.Partitions = append(t.Partitions, p)
			}
			g.Topics = append(g.Topics, t)
		}
		resp.Groups = append(resp.Groups, g)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) handleAlterShareGroupOffsets(r *request, req *kmsg.AlterShareGroupOffsetsRequest) {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if err := b.shareGroupAdminCheck(req.GroupID, true); err != nil {
		resp.ErrorCode, resp.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
		r.failed()
		r.respond(resp)
		return
	}
	meta := b.coordinator.Metadata()
	var write coordinator.GroupStateWrite
	type at struct{ topic, partition int }
	var written []at
	m := b.shares
	m.persistMu.Lock()
	m.mu.Lock()
	for ti, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		topic, known := meta.Topics[rt.Topic]
		if known {
			t.TopicID = topic.ID
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(topic.Partitions):
				p.ErrorCode = protocol.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				p.ErrorCode = protocol.InvalidRequest.Code
			default:
				key := sharePartitionKey{req.GroupID, rt.Topic, rp.Partition}
				delete(m.mu.partitions, key) // loaded again from what is written here
				write.SharePartitions = append(write.SharePartitions, coordinator.SharePartitionWrite{Group: req.GroupID,
					TopicPartition: coordinator.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
					State:          &coordinator.SharePartitionState{TopicID: topic.ID, StartOffset: rp.StartOffset}})
				written = append(written, at{ti, len(t.Partitions)})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	m.mu.Unlock()
	err := b.writeShareAdmin(write)
	m.persistMu.Unlock()
	if err != nil {
		for _, w := range written {
			p := &resp.Topics[w.topic].Partitions[w.partition]
			p.ErrorCode, p.ErrorMessage = groupCommitErrorCode(err), errorMessage(err)
		}
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) handleDeleteShareGroupOffsets(r *request, req *kmsg.DeleteShareGroupOffsetsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if err := b.shareGroupAdminCheck(req.GroupID, true); err != nil {
		resp.ErrorCode, resp.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
		r.failed()
		r.respond(resp)
		return
	}
	meta := b.coordinator.Metadata()
	saved := b.coordinator.GroupState().SharePartitions(req.GroupID)
	var write coordinator.GroupStateWrite
	m := b.shares
	m.persistMu.Lock()
	m.mu.Lock()
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		topic, known := meta.Topics[rt.Topic]
		if !known {
			t.ErrorCode = protocol.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, t)
			continue
		}
		t.TopicID = topic.ID
		for key := range m.mu.partitions {
			if key.group == req.GroupID && key.topic == rt.Topic {
				delete(m.mu.partitions, key)
			}
		}
		for tp := range saved {
			if tp.Topic == rt.Topic {
				write.SharePartitions = append(write.SharePartitions, coordinator.SharePartitionWrite{Group: req.GroupID, TopicPartition: tp})
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	m.mu.Unlock()
	err := b.writeShareAdmin(write)
	m.persistMu.Unlock()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = groupCommitErrorCode(err), errorMessage(err)
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) writeShareAdmin(write coordinator.GroupStateWrite) error {
	ctx, cancel := adminContext(30_000)
	defer cancel()
	return b.coordinator.WriteGroupState(ctx, write)
}
