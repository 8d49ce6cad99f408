package broker

// ShareFetch v1-v2 (KIP-932, KIP-1206 record limits, KIP-1222 renew acks). Applies the request's
// acknowledgements, then acquires for the member up to max_records available records across the
// session's partitions this broker leads (whole batches at a time; exactly max_records in record-limit
// mode, share_acquire_mode 1), and answers their batches with the acquired offset ranges and
// delivery counts. With nothing to acquire it waits up to max_wait_ms, woken by appends, releases and
// lock expiries (at most 20 ms for a member that holds records here: its client may send their
// acknowledgements only with its next fetch). Top level: INVALID_REQUEST (no group or member id, acknowledgements in a session's
// first request), SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH. Per partition:
// UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER (with the current leader), KAFKA_STORAGE_ERROR; per
// partition acknowledgement: INVALID_RECORD_STATE (an offset the member does not hold; nothing of
// that partition's acknowledgements applies), INVALID_REQUEST. Records are copied into the response
// (not sendfile): only the batches holding acquired records go out.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/netpoll"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
	"github.com/sluice-mq/sluice/share"
)

// shareFetchMaxBytes bounds one partition's read when the request names no smaller budget: the
// read is copied and parsed, and a fetch acquires max_records (500 by default), so reading
// megabytes past them only burns memory bandwidth (a batch larger than this is still read whole).
const shareFetchMaxBytes = 1 << 20

// shareFetch is one ShareFetch between its arrival and its response.
type shareFetch struct {
	broker   *Broker
	r        *request
	req      *kmsg.ShareFetchRequest
	group    string
	member   string
	index    topicIndex
	results  map[sharePartitionKey]*kmsg.ShareFetchResponseTopicPartition
	order    []sharePartitionKey
	topicIDs map[string][16]byte
	// fetchable are the session's partitions to acquire from, in the order tried.
	fetchable []sharePartitionKey
	// session is the share session the request belongs to: records are acquired only while it
	// is still the member's session here.
	session  *shareSession
	lockTime time.Duration
}

func (b *Broker) handleShareFetch(r *request, req *kmsg.ShareFetchRequest) {
	f := &shareFetch{broker: b, r: r, req: req, group: optionalString(req.GroupID), member: optionalString(req.MemberID),
		index: newTopicIndex(b.coordinator.Metadata()), results: map[sharePartitionKey]*kmsg.ShareFetchResponseTopicPartition{},
		topicIDs: map[string][16]byte{}}
	if f.group == "" || f.member == "" {
		f.failCode(protocol.InvalidRequest.Code, "share fetch without a group or member id")
		return
	}
	hasAcks := false
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			hasAcks = hasAcks || len(p.AcknowledgementBatches) > 0
		}
	}
	if req.ShareSessionEpoch == 0 && hasAcks {
		f.failCode(protocol.InvalidRequest.Code, "acknowledgements in a share session's first request")
		return
	}
	now := time.Now()
	m := b.shares
	m.mu.Lock()
	session, err := m.sessionLocked(f.group, f.member, req.ShareSessionEpoch, r.session)
	if err != nil {
		m.mu.Unlock()
		f.failCode(protocol.CodeFor(err), err.Error())
		return
	}
	// Partitions named join the session; forgotten ones leave it.
	for _, t := range req.Topics {
		name, known := f.index.names[t.TopicID]
		for _, p := range t.Partitions {
			key := sharePartitionKey{f.group, name, p.Partition}
			if !known {
				key.topic = "\x00" + string(t.TopicID[:])
			}
			f.topicIDs[key.topic] = t.TopicID
			result := f.result(key)
			if !known {
				result.ErrorCode = protocol.UnknownTopicID.Code
				continue
			}
			if req.ShareSessionEpoch != shareFinalEpoch {
				session.partitions[key] = true
			}
		}
	}
	for _, t := range req.ForgottenTopicsData {
		if name, ok := f.index.names[t.TopicID]; ok {
			for _, p := range t.Partitions {
				delete(session.partitions, sharePartitionKey{f.group, name, p})
			}
		}
	}
	f.fetchable = session.fetchOrder()
	f.session = session
	m.mu.Unlock()

	// Acknowledgements.
	for _, t := range req.Topics {
		name, known := f.index.names[t.TopicID]
		if !known {
			continue
		}
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			key := sharePartitionKey{f.group, name, p.Partition}
			if err := b.shareAcknowledge(key, f.member, fetchAckBatches(p.AcknowledgementBatches), now); err != nil {
				result := f.result(key)
				result.AcknowledgeErrorCode, result.AcknowledgeErrorMessage = protocol.CodeFor(err), errorMessage(err)
				f.noteLeader(key, result, err)
			}
		}
	}
	configs := m.groupConfigs(f.group)
	f.lockTime = m.partitionConfig(configs).LockDuration
	if req.ShareSessionEpoch == shareFinalEpoch {
		m.mu.Lock()
		m.closeSessionLocked(f.group, f.member, now)
		m.mu.Unlock()
		f.respond()
		return
	}
	if req.IsRenewAck || req.MaxRecords == 0 && req.Version >= 1 {
		f.respond()
		return
	}
	// A closing broker acquires nothing more: as its connections close, the records their sessions
	// held are released, and a fetch on a connection not closed yet would take them only to lose
	// them with its own connection a moment later, a delivery counted each time (a 20-worker run
	// saw records reach the delivery limit of 5 within 70 ms of a restart).
	if b.closing.Load() || f.acquire() > 0 || req.MaxWaitMillis <= 0 {
		f.respond()
		return
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if b.shares.holdsAny(f.group, f.member, f.fetchable) {
		wait = min(wait, holderMaxWait)
	}
	go f.wait(time.Now().Add(wait))
}

// holderMaxWait bounds the wait of a fetch by a member that holds acquired records of its
// partitions: clients may keep their acknowledgements until the answer (franz-go sends them with
// its next ShareFetch), and while they wait the records stay locked and the in-flight window full.
const holderMaxWait = 20 * time.Millisecond

// holdsAny reports whether member holds acquired records in any of the partitions.
func (m *shareManager) holdsAny(group, member string, keys []sharePartitionKey) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for _, key := range keys {
		if e, ok := m.mu.partitions[key]; ok && e.state.Holds(now, member) {
			return true
		}
	}
	return false
}

// wait parks the fetch until records can be acquired or its deadline passes.
func (f *shareFetch) wait(deadline time.Time) {
	m := f.broker.shares
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	appended := make(chan struct{}, 1)
	wake := func() {
		select {
		case appended <- struct{}{}:
		default:
		}
	}
	var parked []*partition
	defer func() {
		for _, p := range parked {
			p.cancelAwait(f)
		}
	}()
	for {
		m.mu.Lock()
		changed := m.mu.changed
		closed := m.mu.closed
		m.mu.Unlock()
		for _, p := range parked {
			p.cancelAwait(f)
		}
		parked = parked[:0]
		for _, key := range f.fetchable {
			if p, err := f.broker.registry.partition(key.topic, key.partition); err == nil {
				p.awaitAppend(f, wake)
				parked = append(parked, p)
			}
		}
		if closed || f.broker.closing.Load() || f.acquire() > 0 || !time.Now().Before(deadline) {
			f.respond()
			return
		}
		select {
		case <-changed:
		case <-appended:
		case <-timer.C:
		}
	}
}

// acquire acquires records for the member across the fetchable partitions and reports how many.
func (f *shareFetch) acquire() int {
	remaining := int(f.req.MaxRecords)
	if remaining <= 0 {
		remaining = 500
	}
	strict := f.req.ShareAcquireMode == 1
	total := 0
	budget := int64(f.req.MaxBytes)
	if budget <= 0 {
		budget = 1<<31 - 1
	}
	for _, key := range f.fetchable {
		if remaining <= 0 || budget <= 0 {
			break
		}
		if existing, ok := f.results[key]; ok && len(existing.AcquiredRecords) > 0 {
			continue
		}
		p, err := f.broker.registry.partition(key.topic, key.partition)
		if err != nil {
			result := f.result(key)
			result.ErrorCode, result.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
			f.noteLeader(key, result, err)
			continue
		}
		records, ranges, err := f.broker.shares.acquireFrom(key, p, f.member, f.session, f.r.session.conn, remaining, strict, budget)
		if err != nil {
			result := f.result(key)
			result.ErrorCode, result.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
			continue
		}
		if len(ranges) == 0 {
			continue
		}
		result := f.result(key)
		result.Records = records
		for _, a := range ranges {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
			result.AcquiredRecords = append(result.AcquiredRecords, ar)
			n := int(a.Last - a.First + 1)
			total += n
			remaining -= n
		}
		budget -= int64(len(records))
	}
	return total
}

// acquireFrom reads a partition from its next fetch offset and acquires what it can of it. It
// returns the bytes of the batches that hold acquired records. Nothing is acquired unless session
// is still the member's share session here and on conn: if its connection closed, or the member
// opened a new session (its client reset and would drop this answer), while the fetch waited,
// those records would stay locked, unseen, until their locks ran out.
func (m *shareManager) acquireFrom(key sharePartitionKey, p *partition, member string, session *shareSession, conn *netpoll.Conn, maxRecords int, strict bool,
	maxBytes int64) ([]byte, []share.AcquiredRange, error) {
	now := time.Now()
	m.mu.Lock()
	e := m.partitionLocked(key, p)
	offset, ok := e.state.NextFetchOffset(now)
	m.mu.Unlock()
	if !ok {
		return nil, nil, nil
	}
	highWatermark := p.replica.HighWatermark()
	if offset >= highWatermark {
		return nil, nil, nil
	}
	data, err := p.log.Read(offset, min(maxBytes, shareFetchMaxBytes), highWatermark, nil)
	if errors.Is(err, segment.ErrOffsetOutOfRange) && offset < p.log.LogStartOffset() {
		m.mu.Lock()
		e.state.AdvanceStart(p.log.LogStartOffset())
		m.mu.Unlock()
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, storageError(err)
	}
	type span struct{ start, end int }
	var batches []share.Batch
	var spans []span
	for position := 0; position+batch.LengthPrefix+4 <= len(data); {
		h, err := batch.ParseHeader(data[position:])
		if err != nil || position+h.Size() > len(data) {
			break
		}
		if !h.IsControl() {
			batches = append(batches, share.Batch{First: h.BaseOffset, Last: h.LastOffset()})
			spans = append(spans, span{position, position + h.Size()})
		}
		position += h.Size()
	}
	m.mu.Lock()
	if m.mu.partitions[key] != e {
		m.mu.Unlock()
		return nil, nil, nil // reloaded meanwhile; the next attempt reads again
	}
	if s := m.mu.sessions[shareSessionKey{key.group, member}]; s != session || s.conn != conn {
		m.mu.Unlock()
		return nil, nil, nil
	}
	ranges := e.state.Acquire(now, member, batches, maxRecords, strict)
	m.mu.Unlock()
	if len(ranges) == 0 {
		return nil, nil, nil
	}
	first, last := ranges[0].First, ranges[len(ranges)-1].Last
	start, end := -1, 0
	for i, b := range batches {
		if b.Last >= first && b.First <= last {
			if start < 0 {
				start = spans[i].start
			}
			end = spans[i].end
		}
	}
	return data[start:end], ranges, nil
}

func storageError(err error) error {
	if errors.Is(err, segment.ErrCorrupt) {
		return errors.Join(err, protocol.CorruptMessage)
	}
	return errors.Join(err, protocol.KafkaStorageError)
}

// result returns the response entry of a partition, adding it.
func (f *shareFetch) result(key sharePartitionKey) *kmsg.ShareFetchResponseTopicPartition {
	if r, ok := f.results[key]; ok {
		return r
	}
	r := kmsg.NewShareFetchResponseTopicPartition()
	r.Partition = key.partition
	r.CurrentLeader.LeaderID, r.CurrentLeader.LeaderEpoch = -1, -1
	f.results[key] = &r
	f.order = append(f.order, key)
	return &r
}

// noteLeader fills the current leader of a partition this broker does not lead.
func (f *shareFetch) noteLeader(key sharePartitionKey, r *kmsg.ShareFetchResponseTopicPartition, err error) {
	if errors.Is(err, protocol.NotLeaderOrFollower) {
		r.CurrentLeader.LeaderID, r.CurrentLeader.LeaderEpoch = f.index.leaderOf(key.topic, key.partition)
	}
}

func (f *shareFetch) failCode(code int16, message string) {
	resp := f.req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.ErrorCode, resp.ErrorMessage = code, &message
	f.r.failed()
	f.r.respond(resp)
}

// respond answers the partitions with records, errors or acknowledgement results, grouped by topic.
func (f *shareFetch) respond() {
	resp := f.req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.AcquisitionLockTimeoutMillis = int32(f.lockTime / time.Millisecond)
	topics := map[string]int{}
	leaders := map[int32]bool{}
	for _, key := range f.order {
		result := f.results[key]
		i, ok := topics[key.topic]
		if !ok {
			i = len(resp.Topics)
			topics[key.topic] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = f.topicIDs[key.topic]
			if id, known := f.index.meta.Topics[key.topic]; known {
				t.TopicID = id.ID
			}
			resp.Topics = append(resp.Topics, t)
		}
		if result.CurrentLeader.LeaderID >= 0 {
			leaders[result.CurrentLeader.LeaderID] = true
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, *result)
	}
	for id := range leaders {
		if broker, ok := f.index.meta.Brokers[id]; ok {
			ep := kmsg.NewShareFetchResponseNodeEndpoint()
			ep.NodeID = id
			ep.Host, ep.Port = f.broker.endpointFor(f.r, broker)
			resp.NodeEndpoints = append(resp.NodeEndpoints, ep)
		}
	}
	f.r.respond(resp)
}
