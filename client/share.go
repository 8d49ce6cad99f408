package client

// ShareConsumer: a member of a share group (KIP-932). Records, not partitions, are shared: every
// member fetches from every partition of its topics, and the broker hands each record to one
// member at a time, locked for share.record.lock.duration.ms. The member acknowledges each record
// (Accept, Release, Reject); acknowledgements go out with the next Poll's ShareFetch, or with
// Commit, or with Close. A record neither acknowledged nor renewed before its lock ends is
// delivered again, to any member (at-least-once).
//
// Shape: a heartbeat goroutine keeps the membership (ShareGroupHeartbeat on the coordinator's
// membership connection) and the assignment; Poll sends one ShareFetch per partition leader (its
// share session: epoch 0 opens it, each answer moves it on, a session error resets it) with the
// pending acknowledgements of that leader's partitions. Locks: ShareConsumer.mu is a leaf, never
// held on the network.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// AckType is how a share-group record is acknowledged.
type AckType int8

const (
	AckAccept  AckType = 1 // processed: never delivered again
	AckRelease AckType = 2 // give it back: delivered again (archived past the delivery limit)
	AckReject  AckType = 3 // unprocessable: archived
)

// ShareRecord is a record acquired from a share group.
type ShareRecord struct {
	Record
	// DeliveryCount is how many times the record was delivered, this time included.
	DeliveryCount int16
	consumer      *ShareConsumer
	acked         bool
}

// Accept, Release and Reject acknowledge the record (the first call counts); the acknowledgement
// is sent with the next Poll, Commit or Close.
func (r *ShareRecord) Accept()  { r.consumer.ack(r, AckAccept) }
func (r *ShareRecord) Release() { r.consumer.ack(r, AckRelease) }
func (r *ShareRecord) Reject()  { r.consumer.ack(r, AckReject) }

// ShareOption configures a ShareConsumer.
type ShareOption func(*shareConfig)

type shareConfig struct {
	maxRecords int32
	maxWait    time.Duration
}

// WithShareMaxRecords bounds the records one Poll acquires from each leader (default 500).
func WithShareMaxRecords(n int32) ShareOption { return func(c *shareConfig) { c.maxRecords = n } }

// WithShareMaxWait is how long a ShareFetch waits at the broker for records (default 500 ms).
func WithShareMaxWait(d time.Duration) ShareOption { return func(c *shareConfig) { c.maxWait = d } }

// ShareConsumer is one member of a share group.
type ShareConsumer struct {
	client   *Client
	group    string
	topics   []string
	memberID string
	config   shareConfig
	coord    *groupCoordinator
	decomp   *decompressor

	stop    chan struct{}
	stopped chan struct{}

	mu struct {
		sync.Mutex
		epoch      int32
		assignment map[TopicPartition]bool
		assigned   chan struct{} // closed and replaced when the assignment changes
		sessions   map[int32]*shareSessionState
		pending    map[TopicPartition]map[int64]AckType
		ackErr     error
		fatal      error
		closed     bool
	}
}

type shareSessionState struct {
	epoch      int32
	partitions map[TopicPartition]bool
}

// NewShareConsumer joins group subscribed to topics and starts heartbeating.
func NewShareConsumer(c *Client, group string, topics []string, opts ...ShareOption) (*ShareConsumer, error) {
	if group == "" || len(topics) == 0 {
		return nil, errors.New("client: a share consumer needs a group and topics")
	}
	config := shareConfig{maxRecords: 500, maxWait: 500 * time.Millisecond}
	for _, opt := range opts {
		opt(&config)
	}
	decomp, err := newDecompressor()
	if err != nil {
		return nil, err
	}
	var id [16]byte
	rand.Read(id[:])
	s := &ShareConsumer{client: c, group: group, topics: slices.Clone(topics), memberID: base64.RawURLEncoding.EncodeToString(id[:]),
		config: config, coord: newGroupCoordinator(c, group), decomp: decomp, stop: make(chan struct{}), stopped: make(chan struct{})}
	s.mu.assignment = map[TopicPartition]bool{}
	s.mu.assigned = make(chan struct{})
	s.mu.sessions = map[int32]*shareSessionState{}
	s.mu.pending = map[TopicPartition]map[int64]AckType{}
	go s.heartbeatLoop()
	return s, nil
}

// MemberID is the member's id in the group.
func (s *ShareConsumer) MemberID() string { return s.memberID }

func (s *ShareConsumer) ack(r *ShareRecord, t AckType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.acked {
		return
	}
	r.acked = true
	tp := TopicPartition{r.Topic, r.Partition}
	if s.mu.pending[tp] == nil {
		s.mu.pending[tp] = map[int64]AckType{}
	}
	s.mu.pending[tp][r.Offset] = t
}

// heartbeatLoop keeps the membership until Close.
func (s *ShareConsumer) heartbeatLoop() {
	defer close(s.stopped)
	interval := time.Second
	for {
		next, err := s.heartbeat(context.Background(), false)
		switch {
		case err == nil:
			interval = next
		case errors.Is(err, protocol.UnknownMemberID) || errors.Is(err, protocol.FencedMemberEpoch):
			s.mu.Lock()
			s.mu.epoch = 0
			s.mu.Unlock()
			interval = 0
		case IsRetriable(err) || errors.Is(err, ErrNetwork):
			interval = 200 * time.Millisecond
		default:
			s.mu.Lock()
			s.mu.fatal = err
			close(s.mu.assigned)
			s.mu.assigned = make(chan struct{})
			s.mu.Unlock()
			return
		}
		select {
		case <-s.stop:
			return
		case <-time.After(interval):
		}
	}
}

// heartbeat sends one ShareGroupHeartbeat (a leave with leave set) and applies the answer.
func (s *ShareConsumer) heartbeat(ctx context.Context, leave bool) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID = s.group, s.memberID
	s.mu.Lock()
	req.MemberEpoch = s.mu.epoch
	s.mu.Unlock()
	if leave {
		req.MemberEpoch = -1
	}
	if req.MemberEpoch == 0 {
		req.SubscribedTopicNames = s.topics
	}
	raw, err := s.coord.roundTrip(ctx, true, req)
	if err != nil {
		return 0, err
	}
	resp := raw.(*kmsg.ShareGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		if protocol.ErrorCodeOf(resp.ErrorCode) == protocol.NotCoordinator || protocol.ErrorCodeOf(resp.ErrorCode) == protocol.CoordinatorNotAvailable {
			s.coord.forget()
		}
		return 0, errorForCode("share group heartbeat", "", -1, resp.ErrorCode, resp.ErrorMessage)
	}
	if leave {
		return 0, nil
	}
	var assignment map[TopicPartition]bool
	if resp.Assignment != nil {
		names := map[[16]byte]string{}
		for _, topic := range s.topics {
			if info, err := s.client.metadata.topic(ctx, topic); err == nil {
				names[info.id] = topic
			}
		}
		assignment = map[TopicPartition]bool{}
		for _, t := range resp.Assignment.TopicPartitions {
			name, ok := names[t.TopicID]
			if !ok {
				s.client.metadata.requestRefresh()
				continue
			}
			for _, p := range t.Partitions {
				assignment[TopicPartition{name, p}] = true
			}
		}
	}
	s.mu.Lock()
	s.mu.epoch = resp.MemberEpoch
	if assignment != nil {
		s.mu.assignment = assignment
		close(s.mu.assigned)
		s.mu.assigned = make(chan struct{})
	}
	s.mu.Unlock()
	return max(time.Duration(resp.HeartbeatIntervalMillis)*time.Millisecond, 50*time.Millisecond), nil
}

// Poll acquires records (waiting until some are available or ctx ends), after sending the pending
// acknowledgements. An acknowledgement the broker refused (INVALID_RECORD_STATE: the record's lock
// had ended) is reported by the next Commit.
func (s *ShareConsumer) Poll(ctx context.Context) ([]*ShareRecord, error) {
	for {
		s.mu.Lock()
		closed, fatal, assigned := s.mu.closed, s.mu.fatal, s.mu.assigned
		byLeader := map[int32][]TopicPartition{}
		var assignment []TopicPartition
		for tp := range s.mu.assignment {
			assignment = append(assignment, tp)
		}
		for tp := range s.mu.pending {
			if !s.mu.assignment[tp] {
				assignment = append(assignment, tp)
			}
		}
		s.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case fatal != nil:
			return nil, fatal
		}
		for _, tp := range assignment {
			info, err := s.client.metadata.topic(ctx, tp.Topic)
			if err != nil {
				return nil, err
			}
			if int(tp.Partition) < len(info.partitions) {
				leader := info.partitions[tp.Partition].leader
				byLeader[leader] = append(byLeader[leader], tp)
			}
		}
		if len(byLeader) == 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-assigned:
				continue
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var records []*ShareRecord
		var firstErr error
		for leader, partitions := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := s.fetchFrom(ctx, leader, partitions, false)
				mu.Lock()
				records = append(records, got...)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		if len(records) > 0 {
			return records, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if firstErr != nil && !IsRetriable(firstErr) && !errors.Is(firstErr, ErrNetwork) {
			return nil, firstErr
		}
		if firstErr != nil {
			s.client.metadata.requestRefresh()
			if err := sleepContext(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
}

// takeAcks removes and returns the pending acknowledgements of partitions, as batches of one type.
func (s *ShareConsumer) takeAcksLocked(tp TopicPartition) []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	pending := s.mu.pending[tp]
	delete(s.mu.pending, tp)
	offsets := make([]int64, 0, len(pending))
	for offset := range pending {
		offsets = append(offsets, offset)
	}
	slices.Sort(offsets)
	var out []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	for _, offset := range offsets {
		t := int8(pending[offset])
		if n := len(out); n > 0 && out[n-1].LastOffset+1 == offset && out[n-1].AcknowledgeTypes[0] == t {
			out[n-1].LastOffset = offset
			continue
		}
		b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = offset, offset, []int8{t}
		out = append(out, b)
	}
	return out
}

// fetchFrom sends one ShareFetch (acksOnly: a final one, epoch -1, closing the session) to leader.
func (s *ShareConsumer) fetchFrom(ctx context.Context, leader int32, partitions []TopicPartition, final bool) ([]*ShareRecord, error) {
	ids := map[string][16]byte{}
	names := map[[16]byte]string{}
	for _, tp := range partitions {
		info, err := s.client.metadata.topic(ctx, tp.Topic)
		if err != nil {
			return nil, err
		}
		ids[tp.Topic], names[info.id] = info.id, tp.Topic
	}
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = &s.group, &s.memberID
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(s.config.maxWait/time.Millisecond), 1, 50<<20
	req.MaxRecords, req.BatchSize = s.config.maxRecords, s.config.maxRecords
	s.mu.Lock()
	session := s.mu.sessions[leader]
	if session == nil {
		session = &shareSessionState{partitions: map[TopicPartition]bool{}}
		s.mu.sessions[leader] = session
	}
	if final {
		if session.epoch == 0 {
			s.mu.Unlock()
			return nil, nil // no session to close here
		}
		req.ShareSessionEpoch, req.MaxWaitMillis, req.MaxRecords = -1, 0, 0
	} else {
		req.ShareSessionEpoch = session.epoch
	}
	topicIndex := map[string]int{}
	want := map[TopicPartition]bool{}
	for _, tp := range partitions {
		want[tp] = true
		var acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
		if session.epoch > 0 {
			acks = s.takeAcksLocked(tp)
		} else {
			delete(s.mu.pending, tp) // acquired in a session that is gone: the broker released them
		}
		if session.epoch > 0 && session.partitions[tp] && len(acks) == 0 {
			continue
		}
		i, ok := topicIndex[tp.Topic]
		if !ok {
			i = len(req.Topics)
			topicIndex[tp.Topic] = i
			t := kmsg.NewShareFetchRequestTopic()
			t.TopicID = ids[tp.Topic]
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewShareFetchRequestTopicPartition()
		p.Partition, p.PartitionMaxBytes, p.AcknowledgementBatches = tp.Partition, 8<<20, acks
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	for tp := range session.partitions {
		if !want[tp] || !s.mu.assignment[tp] && !final {
			f := kmsg.NewShareFetchRequestForgottenTopicsData()
			f.TopicID, f.Partitions = ids[tp.Topic], []int32{tp.Partition}
			if f.TopicID != ([16]byte{}) {
				req.ForgottenTopicsData = append(req.ForgottenTopicsData, f)
			}
		}
	}
	s.mu.Unlock()
	conn, err := s.client.pool.conn(ctx, leader, roleFetch)
	if err != nil {
		return nil, err
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		s.resetSession(leader)
		return nil, err
	}
	resp := raw.(*kmsg.ShareFetchResponse)
	if resp.ErrorCode != 0 {
		s.resetSession(leader)
		return nil, errorForCode("share fetch", "", -1, resp.ErrorCode, resp.ErrorMessage)
	}
	s.mu.Lock()
	if final {
		delete(s.mu.sessions, leader)
	} else {
		session.epoch = max(1, session.epoch+1)
		for _, tp := range partitions {
			session.partitions[tp] = s.mu.assignment[tp]
		}
		for _, f := range req.ForgottenTopicsData {
			for _, p := range f.Partitions {
				delete(session.partitions, TopicPartition{names[f.TopicID], p})
			}
		}
	}
	var records []*ShareRecord
	var firstErr error
	for _, t := range resp.Topics {
		name := names[t.TopicID]
		for _, p := range t.Partitions {
			tp := TopicPartition{name, p.Partition}
			if p.AcknowledgeErrorCode != 0 && s.mu.ackErr == nil {
				s.mu.ackErr = errorForCode("share acknowledge", name, p.Partition, p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage)
			}
			if p.ErrorCode != 0 {
				if firstErr == nil {
					firstErr = errorForCode("share fetch", name, p.Partition, p.ErrorCode, p.ErrorMessage)
				}
				continue
			}
			if len(p.AcquiredRecords) == 0 || name == "" {
				continue
			}
			decoded, _, err := decodeBatches(p.Records, tp, 0, s.decomp, nil)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			for _, r := range decoded {
				for _, a := range p.AcquiredRecords {
					if r.Offset >= a.FirstOffset && r.Offset <= a.LastOffset {
						records = append(records, &ShareRecord{Record: *r, DeliveryCount: a.DeliveryCount, consumer: s})
						break
					}
				}
			}
		}
	}
	s.mu.Unlock()
	return records, firstErr
}

func (s *ShareConsumer) resetSession(leader int32) {
	s.mu.Lock()
	delete(s.mu.sessions, leader)
	s.mu.Unlock()
}

// Commit sends the pending acknowledgements now (ShareAcknowledge per leader) and reports the first
// acknowledgement the broker refused since the last Commit.
func (s *ShareConsumer) Commit(ctx context.Context) error {
	s.mu.Lock()
	var partitions []TopicPartition
	for tp := range s.mu.pending {
		partitions = append(partitions, tp)
	}
	s.mu.Unlock()
	byLeader := map[int32][]TopicPartition{}
	for _, tp := range partitions {
		info, err := s.client.metadata.topic(ctx, tp.Topic)
		if err != nil {
			return err
		}
		if int(tp.Partition) < len(info.partitions) {
			leader := info.partitions[tp.Partition].leader
			byLeader[leader] = append(byLeader[leader], tp)
		}
	}
	for leader, tps := range byLeader {
		if err := s.acknowledge(ctx, leader, tps, false); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.mu.ackErr
	s.mu.ackErr = nil
	return err
}

// acknowledge sends a ShareAcknowledge with the pending acknowledgements of partitions (final:
// epoch -1, closing the session).
func (s *ShareConsumer) acknowledge(ctx context.Context, leader int32, partitions []TopicPartition, final bool) error {
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = &s.group, &s.memberID
	s.mu.Lock()
	session := s.mu.sessions[leader]
	if session == nil || session.epoch == 0 {
		for _, tp := range partitions {
			delete(s.mu.pending, tp) // no session: the broker released those records already
		}
		s.mu.Unlock()
		return nil
	}
	req.ShareSessionEpoch = session.epoch
	if final {
		req.ShareSessionEpoch = -1
	}
	topicIndex := map[string]int{}
	for _, tp := range partitions {
		info := s.client.metadata.cached(tp.Topic)
		if info == nil {
			continue
		}
		batches := s.takeAcksLocked(tp)
		if len(batches) == 0 {
			continue
		}
		i, ok := topicIndex[tp.Topic]
		if !ok {
			i = len(req.Topics)
			topicIndex[tp.Topic] = i
			t := kmsg.NewShareAcknowledgeRequestTopic()
			t.TopicID = info.id
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewShareAcknowledgeRequestTopicPartition()
		p.Partition = tp.Partition
		for _, b := range batches {
			ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
			ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			p.AcknowledgementBatches = append(p.AcknowledgementBatches, ab)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	s.mu.Unlock()
	if len(req.Topics) == 0 && !final {
		return nil
	}
	conn, err := s.client.pool.conn(ctx, leader, roleFetch)
	if err != nil {
		return err
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		s.resetSession(leader)
		return err
	}
	resp := raw.(*kmsg.ShareAcknowledgeResponse)
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp.ErrorCode != 0 {
		delete(s.mu.sessions, leader)
		return errorForCode("share acknowledge", "", -1, resp.ErrorCode, resp.ErrorMessage)
	}
	if final {
		delete(s.mu.sessions, leader)
	} else {
		session.epoch = max(1, session.epoch+1)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 && s.mu.ackErr == nil {
				s.mu.ackErr = errorForCode("share acknowledge", "", p.Partition, p.ErrorCode, p.ErrorMessage)
			}
		}
	}
	return nil
}

// Close sends the pending acknowledgements, closes the share sessions (the broker releases what
// this member still holds) and leaves the group.
func (s *ShareConsumer) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	leaders := map[int32][]TopicPartition{}
	for leader := range s.mu.sessions {
		leaders[leader] = nil
	}
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
	var errs []error
	s.mu.Lock()
	for tp := range s.mu.pending {
		if info := s.client.metadata.cached(tp.Topic); info != nil && int(tp.Partition) < len(info.partitions) {
			leader := info.partitions[tp.Partition].leader
			leaders[leader] = append(leaders[leader], tp)
		}
	}
	s.mu.Unlock()
	for leader, tps := range leaders {
		if err := s.acknowledge(ctx, leader, tps, true); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := s.heartbeat(ctx, true); err != nil && !errors.Is(err, protocol.UnknownMemberID) {
		errs = append(errs, fmt.Errorf("client: leave share group %q: %w", s.group, err))
	}
	s.coord.close()
	s.decomp.close()
	return errors.Join(errs...)
}
