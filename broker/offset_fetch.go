package broker

// OffsetFetch v0-v8: committed offsets (offset, leader epoch from v5, metadata) from the Raft
// coordinator's offsets snapshot, for the named partitions or, with a null topic list (v2+), every
// partition the group committed; v8 asks for many groups at once. A partition without a commit
// answers offset -1. RequireStable (v7+): a partition with an offset committed inside a transaction
// that has not ended answers UNSTABLE_OFFSET_COMMIT (retriable), offset_fetch_txn.go. Refusals: empty group id INVALID_GROUP_ID; not the metadata leader
// COORDINATOR_NOT_AVAILABLE (at group level from v2).
//
// Freshness: the answer is read only after a read barrier (coordinator.ReadBarrier: the controller's
// read index, confirmed by a quorum, applied here), so a node resumed after a pause or cut off from
// the controller never answers from a stale copy: committed offsets never read backwards. Concurrent
// fetches share one barrier round. Coordination is checked after the barrier, against the fresh
// metadata (NOT_COORDINATOR); a node that cannot complete the barrier answers
// COORDINATOR_NOT_AVAILABLE, and the client retries.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

// fetchedPartition is one answer of OffsetFetch, at any version.
type fetchedPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    string
	errorCode   int16 // UNSTABLE_OFFSET_COMMIT (offset_fetch_txn.go)
}

type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

func (b *Broker) handleOffsetFetch(r *request, req *kmsg.OffsetFetchRequest) {
	b.coordinator.ReadBarrier(func(err error) {
		coordinatorErr := b.checkCoordinator
		if err != nil {
			refused := fmt.Errorf("broker: this node's view of the committed offsets cannot be confirmed fresh: %w: %w",
				protocol.CoordinatorNotAvailable, err)
			coordinatorErr = func(string) error { return refused }
		}
		b.answerOffsetFetch(r, req, coordinatorErr)
	})
}

// answerOffsetFetch answers from this node's offsets snapshot, once the read barrier passed.
func (b *Broker) answerOffsetFetch(r *request, req *kmsg.OffsetFetchRequest, coordinatorErr func(string) error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	offsets := b.coordinator.Offsets()
	if req.Version < 8 {
		topics := make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		if req.Topics == nil {
			topics = nil
		}
		code, fetched := fetchGroupOffsets(offsets, req.Group, topics, coordinatorErr(req.Group))
		if req.RequireStable {
			b.markUnstable(req.Group, fetched)
		}
		resp.ErrorCode = code
		for _, t := range fetched {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.topic
			for _, p := range t.partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = p.partition, p.offset, p.leaderEpoch
				metadata := p.metadata
				rp.Metadata = &metadata
				rp.ErrorCode = code // v0-v1 carry errors per partition only
				if p.errorCode != 0 {
					rp.ErrorCode = p.errorCode
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if code != 0 {
			r.failed()
		}
		r.respond(resp)
		return
	}
	for _, g := range req.Groups {
		var topics map[string][]int32
		if g.Topics != nil {
			topics = make(map[string][]int32, len(g.Topics))
			for _, t := range g.Topics {
				topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			}
		}
		code, fetched := fetchGroupOffsets(offsets, g.Group, topics, coordinatorErr(g.Group))
		if req.RequireStable {
			b.markUnstable(g.Group, fetched)
		}
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, code
		for _, t := range fetched {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.topic
			for _, p := range t.partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = p.partition, p.offset, p.leaderEpoch
				rp.ErrorCode = p.errorCode
				metadata := p.metadata
				rp.Metadata = &metadata
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		if code != 0 {
			r.failed()
		}
		resp.Groups = append(resp.Groups, rg)
	}
	r.respond(resp)
}

// fetchGroupOffsets answers one group: for topics nil, everything it committed (sorted); otherwise
// the named partitions in the order asked (topics sorted by name).
func fetchGroupOffsets(offsets *coordinator.Offsets, groupID string, topics map[string][]int32, coordinatorErr error) (int16, []fetchedTopic) {
	err := coordinatorErr
	if groupID == "" {
		err = fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	code := protocol.CodeFor(err)
	committed := offsets.Group(groupID)
	if topics == nil {
		topics = map[string][]int32{}
		if code == 0 {
			for tp := range committed {
				topics[tp.Topic] = append(topics[tp.Topic], tp.Partition)
			}
			for name := range topics {
				slices.Sort(topics[name])
			}
		}
	}
	var out []fetchedTopic
	for _, name := range sortedGroupKeys(topics) {
		t := fetchedTopic{topic: name}
		for _, partition := range topics[name] {
			p := fetchedPartition{partition: partition, offset: -1, leaderEpoch: -1}
			if c, ok := committed[coordinator.TopicPartition{Topic: name, Partition: partition}]; ok && code == 0 {
				p.offset, p.leaderEpoch, p.metadata = c.Offset, c.LeaderEpoch, c.Metadata
			}
			t.partitions = append(t.partitions, p)
		}
		out = append(out, t)
	}
	return code, out
}

func sortedGroupKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	return keys
}
