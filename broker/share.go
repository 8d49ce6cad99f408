package broker

// The share-group manager (KIP-932): membership of the share groups this broker coordinates, the
// share-partition state of the partitions it leads, and the share sessions of the members that
// fetch from it. The state machines are in package share; this file keeps them, loads them from
// and persists them to the Raft coordinator, and wakes parked ShareFetches.
//
// Durability: every change that must survive (a share partition's start offset and the states and
// delivery counts of its in-flight records, a share group's epoch) marks its owner dirty; one
// persister goroutine writes everything dirty in one coordinator.WriteGroupState call (one Raft
// entry), then the next batch, so a Raft round is paid per batch, never per record or request.
// Acknowledgements are answered before their batch commits: a crash loses at most the last batch,
// whose records are then delivered again (at-least-once). Acquisition locks are never persisted.
// A partition whose leadership moves is loaded afresh by its new leader from the coordinator.
//
// Lock order: shareManager.persistMu, then shareManager.mu; no other lock is taken under it except a partition's log reads
// (which take no broker lock). Responses are never sent under it.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/netpoll"
	"github.com/sluice-mq/sluice/share"
)

// shareTickInterval is how often lock and session deadlines are checked; it bounds how late an
// expired lock's records become available to a parked fetch.
const shareTickInterval = 50 * time.Millisecond

type sharePartitionKey struct {
	group     string
	topic     string
	partition int32
}

type shareSessionKey struct {
	group, member string
}

// sharePartitionEntry is one share partition this broker leads.
type sharePartitionEntry struct {
	state   *share.Partition
	topicID [16]byte
	// leaderEpoch is the partition's leader epoch when the state was loaded: a different epoch
	// means leadership moved away and back, and the state is loaded again.
	leaderEpoch int32
}

// shareGroupEntry is one share group this broker coordinates.
type shareGroupEntry struct {
	group *share.Group
	// dirty: the group's record (its epoch) must be written.
	dirty bool
}

type shareManager struct {
	broker *Broker
	logger *slog.Logger

	mu struct {
		sync.Mutex
		groups     map[string]*shareGroupEntry
		partitions map[sharePartitionKey]*sharePartitionEntry
		sessions   map[shareSessionKey]*shareSession
		// changed is closed (and replaced) whenever records may have become available.
		changed chan struct{}
		closed  bool
	}
	persistWake chan struct{}
	// persistMu makes each batch's snapshot and write one step, so batches land in order.
	persistMu sync.Mutex
	done      chan struct{}
	persisted chan struct{} // closed once the final flush ran
	started   bool
}

func newShareManager(b *Broker, logger *slog.Logger) *shareManager {
	m := &shareManager{broker: b, logger: logger, persistWake: make(chan struct{}, 1), done: make(chan struct{}), persisted: make(chan struct{})}
	m.mu.groups = map[string]*shareGroupEntry{}
	m.mu.partitions = map[sharePartitionKey]*sharePartitionEntry{}
	m.mu.sessions = map[shareSessionKey]*shareSession{}
	m.mu.changed = make(chan struct{})
	return m
}

// start runs the persister and the ticker; they stop with close.
func (m *shareManager) start() {
	m.started = true
	go m.persistLoop()
	go m.tickLoop()
}

// close stops taking changes, writes what is dirty and stops the goroutines.
func (m *shareManager) close() {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return
	}
	m.mu.closed = true
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
	m.mu.Unlock()
	close(m.done)
	if m.started {
		<-m.persisted
	}
}

// notifyLocked wakes parked fetches and the persister.
func (m *shareManager) notifyLocked() {
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
	m.wakePersister()
}

func (m *shareManager) wakePersister() {
	select {
	case m.persistWake <- struct{}{}:
	default:
	}
}

// groupConfigs returns a group's effective configs: overrides over the defaults.
func (m *shareManager) groupConfigs(group string) map[string]string {
	configs := coordinator.GroupConfigDefaults()
	for k, v := range m.broker.coordinator.GroupState().Configs(group) {
		configs[k] = v
	}
	return configs
}

func configMillis(configs map[string]string, key string) time.Duration {
	n, _ := strconv.Atoi(configs[key])
	return time.Duration(n) * time.Millisecond
}

// partitionConfig is the share-partition policy of a group.
func (m *shareManager) partitionConfig(configs map[string]string) share.Config {
	c := share.DefaultConfig()
	c.LockDuration = configMillis(configs, coordinator.GroupConfigShareRecordLockDurationMs)
	c.DeliveryCountLimit, _ = strconv.Atoi(configs[coordinator.GroupConfigShareDeliveryCountLimit])
	return c
}

// membershipConfig is the membership policy of a group.
func membershipConfig(configs map[string]string) share.GroupConfig {
	c := share.DefaultGroupConfig()
	c.SessionTimeout = configMillis(configs, coordinator.GroupConfigShareSessionTimeoutMs)
	c.HeartbeatInterval = min(configMillis(configs, coordinator.GroupConfigShareHeartbeatIntervalMs), c.SessionTimeout/2)
	return c
}

// shareGroupRecord is a share group's durable record body.
type shareGroupRecord struct {
	Epoch int32 `json:"epoch"`
}

// groupLocked returns the share group, loading or creating it.
func (m *shareManager) groupLocked(id string, create bool) *shareGroupEntry {
	if e, ok := m.mu.groups[id]; ok {
		return e
	}
	var epoch int32
	record, ok := m.broker.coordinator.GroupState().Record(id)
	if ok && record.Type == coordinator.GroupTypeShare {
		var body shareGroupRecord
		if json.Unmarshal(record.Body, &body) == nil {
			epoch = body.Epoch
		}
	} else if !create {
		return nil
	}
	e := &shareGroupEntry{group: share.NewGroup(id, membershipConfig(m.groupConfigs(id)), epoch), dirty: !ok}
	m.mu.groups[id] = e
	return e
}

// knownShareGroup reports whether id is a share group (in memory or persisted).
func (m *shareManager) knownShareGroup(id string) bool {
	m.mu.Lock()
	_, ok := m.mu.groups[id]
	m.mu.Unlock()
	if ok {
		return true
	}
	record, ok := m.broker.coordinator.GroupState().Record(id)
	return ok && record.Type == coordinator.GroupTypeShare
}

// partitionLocked returns the state of a share partition this broker leads, loading it from the
// coordinator or starting it at the group's share.auto.offset.reset position.
func (m *shareManager) partitionLocked(key sharePartitionKey, p *partition) *sharePartitionEntry {
	configs := m.groupConfigs(key.group)
	config := m.partitionConfig(configs)
	epoch := p.state.Load().leaderEpoch
	if e, ok := m.mu.partitions[key]; ok && e.topicID == p.topicID && e.leaderEpoch == epoch {
		e.state.SetConfig(config)
		return e
	}
	e := &sharePartitionEntry{topicID: p.topicID, leaderEpoch: epoch}
	if saved, ok := m.broker.coordinator.GroupState().SharePartition(key.group, key.topic, key.partition); ok && saved.TopicID == p.topicID {
		cp := share.Checkpoint{StartOffset: saved.StartOffset}
		for _, r := range saved.Ranges {
			cp.Ranges = append(cp.Ranges, share.StateRange{First: r.First, Last: r.Last, State: share.RecordState(r.State), DeliveryCount: r.DeliveryCount})
		}
		restored, err := share.Restore(config, cp)
		if err == nil {
			e.state = restored
		} else {
			m.logger.Error("share partition state unreadable; starting at the reset position", "group", key.group,
				"topic", key.topic, "partition", key.partition, "err", err)
		}
	}
	if e.state == nil {
		e.state = share.NewPartition(config, m.resetOffset(configs, p))
	}
	e.state.AdvanceStart(p.log.LogStartOffset())
	m.mu.partitions[key] = e
	return e
}

// resetOffset is where a group without state starts reading a partition.
func (m *shareManager) resetOffset(configs map[string]string, p *partition) int64 {
	reset, _ := coordinator.ParseShareAutoOffsetReset(configs[coordinator.GroupConfigShareAutoOffsetReset])
	switch {
	case reset.Earliest:
		return p.log.LogStartOffset()
	case reset.ByDuration > 0:
		offset, _, found, err := p.log.OffsetForTimestamp(time.Now().Add(-reset.ByDuration).UnixMilli())
		if err == nil && found {
			return offset
		}
	}
	return p.replica.HighWatermark()
}

// releaseMemberLocked releases whatever member holds in group's partitions on this broker.
func (m *shareManager) releaseMemberLocked(group, member string, now time.Time) {
	released := 0
	for key, e := range m.mu.partitions {
		if key.group == group {
			released += e.state.ReleaseMember(now, member)
		}
	}
	if released > 0 {
		m.notifyLocked()
	}
}

// connectionClosed ends the share sessions of a closed connection and releases their records.
func (m *shareManager) connectionClosed(conn *netpoll.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for key, s := range m.mu.sessions {
		if s.conn == conn {
			delete(m.mu.sessions, key)
			m.releaseMemberLocked(key.group, key.member, now)
		}
	}
}

// tickLoop expires locks and member sessions.
func (m *shareManager) tickLoop() {
	ticker := time.NewTicker(shareTickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-ticker.C:
		}
		m.tick(time.Now())
	}
}

func (m *shareManager) tick(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for _, e := range m.mu.partitions {
		if deadline := e.state.NextDeadline(); !deadline.IsZero() && !deadline.After(now) && e.state.Expire(now) > 0 {
			changed = true
		}
	}
	for id, e := range m.mu.groups {
		expired := e.group.Tick(now)
		if len(expired) > 0 {
			e.dirty = true
			changed = true
		}
		for _, member := range expired {
			delete(m.mu.sessions, shareSessionKey{id, member})
			m.releaseMemberLocked(id, member, now)
		}
	}
	if changed {
		m.notifyLocked()
	}
}

// persistLoop writes dirty state in batches until close, then once more.
func (m *shareManager) persistLoop() {
	defer close(m.persisted)
	for {
		select {
		case <-m.done:
			m.persistOnce()
			return
		case <-m.persistWake:
		}
		m.persistOnce()
	}
}

// persistOnce writes everything dirty as one batch; on failure it is marked dirty again.
func (m *shareManager) persistOnce() error {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	var write coordinator.GroupStateWrite
	var partitions []*sharePartitionEntry
	var groups []*shareGroupEntry
	m.mu.Lock()
	for key, e := range m.mu.partitions {
		if !e.state.Dirty() {
			continue
		}
		cp := e.state.Checkpoint()
		state := &coordinator.SharePartitionState{TopicID: e.topicID, StartOffset: cp.StartOffset}
		for _, r := range cp.Ranges {
			state.Ranges = append(state.Ranges, coordinator.ShareStateRange{First: r.First, Last: r.Last, State: uint8(r.State), DeliveryCount: r.DeliveryCount})
		}
		write.SharePartitions = append(write.SharePartitions, coordinator.SharePartitionWrite{Group: key.group,
			TopicPartition: coordinator.TopicPartition{Topic: key.topic, Partition: key.partition}, State: state})
		partitions = append(partitions, e)
	}
	for id, e := range m.mu.groups {
		if !e.dirty {
			continue
		}
		e.dirty = false
		body, _ := json.Marshal(shareGroupRecord{Epoch: e.group.Epoch()})
		write.Groups = append(write.Groups, coordinator.GroupRecordWrite{Group: id, Record: &coordinator.GroupRecord{Type: coordinator.GroupTypeShare, Body: body}})
		groups = append(groups, e)
	}
	m.mu.Unlock()
	if write.Empty() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := m.broker.coordinator.WriteGroupState(ctx, write)
	cancel()
	if err == nil {
		return nil
	}
	if !errors.Is(err, coordinator.ErrClosed) {
		m.logger.Warn("share state write failed; retrying", "partitions", len(write.SharePartitions), "err", err)
	}
	m.mu.Lock()
	for _, e := range partitions {
		e.state.MarkDirty()
	}
	for _, e := range groups {
		e.dirty = true
	}
	closed := m.mu.closed
	m.mu.Unlock()
	if !closed && !errors.Is(err, coordinator.ErrClosed) {
		select {
		case <-m.done:
		case <-time.After(100 * time.Millisecond):
			m.wakePersister()
		}
	}
	return err
}
