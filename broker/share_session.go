package broker

// Share sessions (KIP-932): a member's ShareFetch/ShareAcknowledge requests to one broker form a
// session keyed by (group, member), tied to the connection that opened it. Epoch 0 opens a new
// session (closing one the member had), -1 closes it after its acknowledgements, and closing
// releases what the member still holds here. Any other epoch must be the session's next: each
// request moves it on by one (wrapping to 1). SHARE_SESSION_NOT_FOUND answers an epoch for a
// session that does not exist; INVALID_SHARE_SESSION_EPOCH a wrong epoch. A closed connection ends
// its sessions.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/netpoll"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/share"
)

const shareFinalEpoch = -1

// shareSession is one member's share session on this broker.
type shareSession struct {
	conn *netpoll.Conn
	// epoch is the session epoch the next request must carry.
	epoch      int32
	partitions map[sharePartitionKey]bool
	// fetches counts the session's fetches; it rotates where acquisition starts.
	fetches int
}

// fetchOrder lists the session's partitions, starting one further along at each fetch so that
// max_records does not always go to the same partition.
func (s *shareSession) fetchOrder() []sharePartitionKey {
	keys := slices.SortedFunc(maps.Keys(s.partitions), func(a, b sharePartitionKey) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	if len(keys) > 1 {
		s.fetches++
		shift := s.fetches % len(keys)
		keys = append(keys[shift:], keys[:shift]...)
	}
	return keys
}

// sessionLocked applies a request's session epoch. It returns the session (nil after a close, or
// on error) and whether the session is closing.
func (m *shareManager) sessionLocked(group, member string, epoch int32, conn *session) (*shareSession, error) {
	if conn.closed.Load() {
		// A request queued before its connection closed: a session opened now would hold
		// records nobody can receive until their locks end.
		return nil, fmt.Errorf("broker: connection of member %q closed: %w", member, protocol.ShareSessionNotFound)
	}
	key := shareSessionKey{group, member}
	s := m.mu.sessions[key]
	switch {
	case epoch == 0:
		if s != nil {
			// The member's client lost its session (franz-go resets it after an error and drops
			// what an answer in flight acquired; this repo's client forgets its pending
			// acknowledgements): what it holds here can never be acknowledged, so it goes back to
			// the group now rather than when its locks run out.
			m.closeSessionLocked(group, member, time.Now())
		}
		s = &shareSession{conn: conn.conn, epoch: 1, partitions: map[sharePartitionKey]bool{}}
		m.mu.sessions[key] = s
		return s, nil
	case s == nil:
		return nil, fmt.Errorf("broker: no share session for member %q of group %q: %w", member, group, protocol.ShareSessionNotFound)
	case epoch == shareFinalEpoch:
		return s, nil
	case epoch != s.epoch:
		return nil, fmt.Errorf("broker: share session epoch %d, expected %d: %w", epoch, s.epoch, protocol.InvalidShareSessionEpoch)
	}
	s.epoch++
	if s.epoch < 1 {
		s.epoch = 1
	}
	s.conn = conn.conn
	return s, nil
}

// closeSessionLocked ends a member's session and releases its records here.
func (m *shareManager) closeSessionLocked(group, member string, now time.Time) {
	delete(m.mu.sessions, shareSessionKey{group, member})
	m.releaseMemberLocked(group, member, now)
}

// topicIndex maps topic ids to names for one request.
type topicIndex struct {
	meta  *coordinator.Metadata
	names map[[16]byte]string
}

func newTopicIndex(meta *coordinator.Metadata) topicIndex {
	names := make(map[[16]byte]string, len(meta.Topics))
	for name, t := range meta.Topics {
		names[t.ID] = name
	}
	return topicIndex{meta: meta, names: names}
}

// leaderOf reports a partition's leader and epoch from metadata (-1, -1 when unknown).
func (ix topicIndex) leaderOf(topic string, partition int32) (int32, int32) {
	t, ok := ix.meta.Topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1
	}
	pm := t.Partitions[partition]
	return pm.Leader, pm.LeaderEpoch
}

// shareAcks converts a request's acknowledgement batches.
func shareAcks(firsts, lasts []int64, types [][]int8) []share.Ack {
	acks := make([]share.Ack, len(firsts))
	for i := range firsts {
		a := share.Ack{First: firsts[i], Last: lasts[i]}
		for _, t := range types[i] {
			a.Types = append(a.Types, share.AckType(t))
		}
		acks[i] = a
	}
	return acks
}

// acknowledge applies a member's acknowledgements of one partition this broker leads.
func (b *Broker) shareAcknowledge(key sharePartitionKey, member string, acks []share.Ack, now time.Time) error {
	if len(acks) == 0 {
		return nil
	}
	if err := share.ValidateAcks(sortedAcks(acks)); err != nil {
		return err
	}
	p, err := b.registry.partition(key.topic, key.partition)
	if err != nil {
		return err
	}
	m := b.shares
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.partitionLocked(key, p)
	if err := e.state.Acknowledge(now, member, acks); err != nil {
		return err
	}
	if e.state.Dirty() {
		m.notifyLocked()
	}
	return nil
}

func sortedAcks(acks []share.Ack) []share.Ack {
	return slices.SortedFunc(slices.Values(acks), func(a, b share.Ack) int {
		switch {
		case a.First < b.First:
			return -1
		case a.First > b.First:
			return 1
		}
		return 0
	})
}

// fetchAckBatches flattens ShareFetch acknowledgement batches.
func fetchAckBatches(batches []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) []share.Ack {
	firsts, lasts, types := make([]int64, len(batches)), make([]int64, len(batches)), make([][]int8, len(batches))
	for i, a := range batches {
		firsts[i], lasts[i], types[i] = a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
	}
	return shareAcks(firsts, lasts, types)
}

// ackBatches flattens ShareAcknowledge acknowledgement batches.
func ackBatches(batches []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) []share.Ack {
	firsts, lasts, types := make([]int64, len(batches)), make([]int64, len(batches)), make([][]int8, len(batches))
	for i, a := range batches {
		firsts[i], lasts[i], types[i] = a.FirstOffset, a.LastOffset, a.AcknowledgeTypes
	}
	return shareAcks(firsts, lasts, types)
}
