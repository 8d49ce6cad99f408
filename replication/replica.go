package replication

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

// Role is what a replica does at its current epoch.
type Role int

const (
	// RoleNone: not yet told, or no longer a replica.
	RoleNone Role = iota
	RoleLeader
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// Replica is this broker's copy of one partition. See the package doc for the roles, watermarks
// and invariants.
type Replica struct {
	Topic     string
	Partition int32
	Log       *segment.Log
	Epochs    *EpochHistory
	nodeID    int32
	ackMode   AckMode
	unsafeAck bool // Config.UnsafeLeaderOnlyAck (unsafe_ack.go)
	// lagMax is Config.LagTimeMax: InSyncCount's horizon; grace is Config.DisconnectGrace.
	lagMax, grace time.Duration
	// observeAckWait is Config.ObserveAckWait (ack_wait.go); nil: off.
	observeAckWait func(AckWaitStage, time.Duration)

	// highWatermark is published for lock-free reads; written under mu.
	// Invariant (leader, one epoch): never decreases; always <= Log.LogEndOffset().
	highWatermark atomic.Int64

	// appendGate: appends hold it shared, role changes exclusively, so that no leader append lands
	// after the replica stopped leading (a follower truncates what it must right after).
	appendGate sync.RWMutex

	mu struct {
		sync.Mutex
		role           Role
		leaderID       int32
		leaderEpoch    int32
		partitionEpoch int32
		replicas       []int32
		isr            []int32 // committed ISR
		// pendingISR is the ISR proposed to the controller and not yet seen committed; nil if none.
		pendingISR []int32
		// growAfter: the controller refused an ISR that added members; none is proposed again
		// before this (shrinks are, at once). growRefusals counts the refusals in a row, which
		// lengthen the wait. See ProposalFailed.
		growAfter    time.Time
		growRefusals int
		// epochStart is the log end when this replica became leader at leaderEpoch.
		epochStart int64
		followers  map[int32]FollowerPosition
		// durableWatermark: every in-sync replica has fsynced below it (see the package doc).
		durableWatermark int64
		waiters          []ackWaiter
		// flushRequested is the highest offset a local flush notification is pending for.
		flushRequested int64
	}
}

type ackWaiter struct {
	lastOffset int64
	minInsync  int
	done       func(error)
	times      ackWaitTimes // ack_wait.go; zero unless Config.ObserveAckWait is set
}

// NewReplica wraps an open log and its epoch history. It starts with no role.
func NewReplica(topic string, partition int32, log *segment.Log, epochs *EpochHistory, cfg Config) *Replica {
	r := &Replica{Topic: topic, Partition: partition, Log: log, Epochs: epochs, nodeID: cfg.NodeID, ackMode: cfg.AckMode, unsafeAck: cfg.UnsafeLeaderOnlyAck, lagMax: cfg.LagTimeMax, grace: cfg.DisconnectGrace, observeAckWait: cfg.ObserveAckWait}
	r.mu.leaderID = -1
	r.mu.leaderEpoch = -1
	r.mu.flushRequested = -1
	r.highWatermark.Store(log.LogStartOffset())
	return r
}

// HighWatermark is the offset below which records are committed (readable by consumers).
func (r *Replica) HighWatermark() int64 { return r.highWatermark.Load() }

// State returns the role, leader and leader epoch.
func (r *Replica) State() (role Role, leaderID, leaderEpoch int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.role, r.mu.leaderID, r.mu.leaderEpoch
}

// ISR returns the committed in-sync replica set.
func (r *Replica) ISR() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.isr)
}

// InSyncCount is how many members of the committed ISR, the leader included, are in sync at now:
// followers count only while they have been caught up within the lag time. The committed ISR shrinks
// only through the controller, which cannot act while a majority of the cluster is unreachable; this
// count lets the leader refuse acks=all with NOT_ENOUGH_REPLICAS meanwhile instead of accepting
// batches that cannot be acknowledged. A replica that does not lead reports the committed ISR size.
func (r *Replica) InSyncCount(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.role != RoleLeader || r.lagMax <= 0 {
		return len(r.mu.isr)
	}
	count := 0
	for _, id := range r.mu.isr {
		if id == r.nodeID {
			count++
			continue
		}
		if position, ok := r.mu.followers[id]; ok && position.inSync(now, r.lagMax, r.grace) {
			count++
		}
	}
	return count
}

// FollowerLag is how far one replica of a partition this broker leads is behind the leader's log.
type FollowerLag struct {
	Follower int32
	// Records is the leader's log end minus the follower's last fetch offset (the whole log end
	// while it has not fetched at this epoch).
	Records int64
	InSync  bool
}

// FollowerLags reports every follower's lag when this replica leads, nil otherwise.
func (r *Replica) FollowerLags() []FollowerLag {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.role != RoleLeader {
		return nil
	}
	logEnd := r.Log.LogEndOffset()
	var lags []FollowerLag
	for _, id := range r.mu.replicas {
		if id == r.nodeID {
			continue
		}
		lag := FollowerLag{Follower: id, Records: logEnd, InSync: slices.Contains(r.mu.isr, id)}
		if position, ok := r.mu.followers[id]; ok && position.LogEnd >= 0 {
			lag.Records = max(logEnd-position.LogEnd, 0)
		}
		lags = append(lags, lag)
	}
	return lags
}

// Replicas returns the partition's replica set as this replica last heard it.
func (r *Replica) Replicas() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.replicas)
}

// MakeLeader makes this replica the leader at leaderEpoch, or, at the epoch it already leads,
// takes the new replica set, ISR and partition epoch. It returns whether the epoch is new.
func (r *Replica) MakeLeader(leaderEpoch, partitionEpoch int32, replicas, isr []int32, now time.Time) (bool, error) {
	r.appendGate.Lock()
	defer r.appendGate.Unlock()
	r.mu.Lock()
	newEpoch := r.mu.role != RoleLeader || r.mu.leaderEpoch != leaderEpoch
	var failed []ackWaiter
	if newEpoch {
		logEnd := r.Log.LogEndOffset()
		if err := r.Epochs.Assign(leaderEpoch, logEnd); err != nil {
			r.mu.Unlock()
			return false, err
		}
		failed = r.mu.waiters
		r.mu.waiters = nil
		r.mu.role, r.mu.leaderID, r.mu.leaderEpoch = RoleLeader, r.nodeID, leaderEpoch
		r.mu.epochStart = logEnd
		r.mu.followers = map[int32]FollowerPosition{}
		for _, id := range isr {
			if id != r.nodeID {
				// A grace period: an in-sync follower stays in until it fails to catch up for
				// the lag time under this leader.
				r.mu.followers[id] = FollowerPosition{LogEnd: -1, Durable: -1, LastCaughtUp: now}
			}
		}
		r.mu.durableWatermark = min(r.mu.durableWatermark, r.highWatermark.Load())
		r.mu.flushRequested = -1
	}
	// A pending proposal names the partition epoch it was made at: once the metadata has moved past
	// it, the proposal was applied or refused, whatever ISR this (possibly coalesced, later)
	// metadata shows. Waiting for the proposed members to appear instead would wait for ever when a
	// later change (a fenced member leaving) lands in the same update, and no ISR change would be
	// proposed for the partition again until its leader changed.
	moved := partitionEpoch != r.mu.partitionEpoch
	r.mu.partitionEpoch = partitionEpoch
	r.mu.replicas = slices.Clone(replicas)
	r.mu.isr = slices.Clone(isr)
	if r.mu.pendingISR != nil && (newEpoch || moved || sameMembers(r.mu.pendingISR, isr)) {
		r.mu.pendingISR = nil
	}
	fired := r.advanceLocked()
	r.mu.Unlock()
	answer(failed, notLeader(r))
	answerAll(fired)
	return newEpoch, nil
}

// MakeFollower makes this replica a follower of leaderID at leaderEpoch (leaderID -1: the partition
// is offline). Waiting acks=all producers are answered NOT_LEADER_OR_FOLLOWER. It returns whether
// the epoch or leader changed, in which case the follower must find its divergence point again.
func (r *Replica) MakeFollower(leaderID, leaderEpoch, partitionEpoch int32, replicas, isr []int32) bool {
	r.appendGate.Lock()
	defer r.appendGate.Unlock()
	r.mu.Lock()
	changed := r.mu.role != RoleFollower || r.mu.leaderEpoch != leaderEpoch || r.mu.leaderID != leaderID
	failed := r.mu.waiters
	r.mu.waiters = nil
	r.mu.role, r.mu.leaderID, r.mu.leaderEpoch, r.mu.partitionEpoch = RoleFollower, leaderID, leaderEpoch, partitionEpoch
	r.mu.replicas, r.mu.isr = slices.Clone(replicas), slices.Clone(isr)
	r.mu.pendingISR, r.mu.followers = nil, nil
	r.mu.Unlock()
	answer(failed, notLeader(r))
	return changed
}

// AbandonWaiters answers every waiting acks=all producer with err, keeping the role: this leader
// can no longer tell whether it still leads (its controller session lapsed).
func (r *Replica) AbandonWaiters(err error) {
	r.mu.Lock()
	failed := r.mu.waiters
	r.mu.waiters = nil
	r.mu.Unlock()
	answer(failed, err)
}

// Stop drops the role: the replica is being deleted or the broker is closing.
func (r *Replica) Stop() {
	r.appendGate.Lock()
	defer r.appendGate.Unlock()
	r.mu.Lock()
	failed := r.mu.waiters
	r.mu.waiters = nil
	r.mu.role = RoleNone
	r.mu.Unlock()
	answer(failed, notLeader(r))
}

func notLeader(r *Replica) error {
	return fmt.Errorf("replication: %s-%d: leadership moved: %w", r.Topic, r.Partition, protocol.NotLeaderOrFollower)
}

// Append appends client batches as the leader (see segment.Log.Append), stamping them with the
// leader epoch. It fails with NOT_LEADER_OR_FOLLOWER when this replica does not lead.
func (r *Replica) Append(raw []byte) (segment.AppendResult, error) {
	r.appendGate.RLock()
	defer r.appendGate.RUnlock()
	r.mu.Lock()
	role, epoch := r.mu.role, r.mu.leaderEpoch
	r.mu.Unlock()
	if role != RoleLeader {
		return segment.AppendResult{}, notLeader(r)
	}
	result, err := r.Log.Append(raw, epoch)
	if err != nil {
		return result, err
	}
	r.mu.Lock()
	fired := r.advanceLocked()
	r.mu.Unlock()
	answerAll(fired)
	return result, nil
}

// AwaitAcks calls done once lastOffset is acknowledged for acks=all (see the package doc), with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is then smaller than minInsync, or with
// NOT_LEADER_OR_FOLLOWER when the replica stops leading first. done may run on the caller's
// goroutine, a flush goroutine or a fetch handler; it must not block.
func (r *Replica) AwaitAcks(lastOffset int64, minInsync int, done func(error)) {
	r.mu.Lock()
	if r.mu.role != RoleLeader {
		r.mu.Unlock()
		done(notLeader(r))
		return
	}
	waiter := ackWaiter{lastOffset: lastOffset, minInsync: minInsync, done: done}
	if r.observeAckWait != nil {
		waiter.times.registered = time.Now()
	}
	r.mu.waiters = append(r.mu.waiters, waiter)
	requestFlush := r.ackMode == AckFsync && lastOffset > r.mu.flushRequested
	if requestFlush {
		r.mu.flushRequested = lastOffset
	}
	fired := r.advanceLocked()
	r.mu.Unlock()
	answerAll(fired)
	if requestFlush {
		r.Log.NotifyFlushed(lastOffset, r.flushed)
	}
}

// flushed runs when a local flush completed (or failed).
func (r *Replica) flushed(err error) {
	r.mu.Lock()
	if err != nil {
		failed := r.mu.waiters
		r.mu.waiters = nil
		r.mu.Unlock()
		answer(failed, fmt.Errorf("replication: %s-%d: flush: %w: %w", r.Topic, r.Partition, protocol.KafkaStorageError, err))
		return
	}
	fired := r.advanceLocked()
	r.mu.Unlock()
	answerAll(fired)
}

// FollowerFetched records a follower's fetch at the leader: its log end (the fetch offset), durable
// offset and whether its copy failed (FailedCopyTag), as of arrived, when the fetch reached the
// leader. It returns the high watermark to send back, or NOT_LEADER_OR_FOLLOWER /
// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (from the follower's currentLeaderEpoch, -1 to skip).
//
// A report that arrived before the last one recorded is checked but not recorded: a fetch parked at
// the leader is evaluated again when it is woken or expires, after the follower may have reported
// more with later requests (an acknowledgement fetch), and its older position must not move the
// follower back. Moved back, a durable offset stayed behind until the follower's next report,
// which a follower with nothing new sends only when its next parked fetch expires.
func (r *Replica) FollowerFetched(follower, currentLeaderEpoch int32, fetchOffset, durable int64, copyFailed bool, arrived time.Time) (int64, error) {
	r.mu.Lock()
	if r.mu.role != RoleLeader {
		r.mu.Unlock()
		return 0, notLeader(r)
	}
	if currentLeaderEpoch >= 0 && currentLeaderEpoch != r.mu.leaderEpoch {
		code := protocol.FencedLeaderEpoch
		if currentLeaderEpoch > r.mu.leaderEpoch {
			code = protocol.UnknownLeaderEpoch
		}
		r.mu.Unlock()
		return 0, fmt.Errorf("replication: %s-%d: follower %d at epoch %d, leader at %d: %w", r.Topic, r.Partition, follower, currentLeaderEpoch, r.mu.leaderEpoch, code)
	}
	if !slices.Contains(r.mu.replicas, follower) {
		r.mu.Unlock()
		return 0, fmt.Errorf("replication: %s-%d: node %d is not a replica: %w", r.Topic, r.Partition, follower, protocol.NotLeaderOrFollower)
	}
	if logEnd := r.Log.LogEndOffset(); fetchOffset > logEnd {
		r.mu.Unlock()
		return 0, fmt.Errorf("replication: %s-%d: follower %d fetches %d beyond the log end %d: %w", r.Topic, r.Partition, follower, fetchOffset, logEnd, protocol.OffsetOutOfRange)
	}
	position, ok := r.mu.followers[follower]
	if !ok {
		position = FollowerPosition{LogEnd: -1, Durable: -1}
	}
	if arrived.Before(position.LastFetch) {
		high := r.highWatermark.Load()
		r.mu.Unlock()
		return high, nil
	}
	updated := position.fetched(arrived, fetchOffset, durable, r.Log.LogEndOffset(), copyFailed)
	r.mu.followers[follower] = updated
	if r.observeAckWait != nil && (slices.Contains(r.mu.isr, follower) || slices.Contains(r.mu.pendingISR, follower)) {
		r.noteFollowerLocked(position, updated, arrived) // ack_wait.go
	}
	fired := r.advanceLocked()
	high := r.highWatermark.Load()
	r.mu.Unlock()
	answerAll(fired)
	return high, nil
}

// FollowerDisconnected records that follower has no fetch connection to this leader any more (see
// Config.DisconnectGrace); its next fetch clears it.
func (r *Replica) FollowerDisconnected(follower int32, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.role != RoleLeader {
		return
	}
	if position, ok := r.mu.followers[follower]; ok && position.Disconnected.IsZero() {
		position.Disconnected = now
		r.mu.followers[follower] = position
	}
}

// A leader waits before proposing to add members to the ISR again after the controller refused (or
// never answered) such a proposal: firstGrowthBackoff after the first refusal, twice as long after
// each further one in a row, up to maxGrowthBackoff.
const (
	firstGrowthBackoff = 250 * time.Millisecond
	maxGrowthBackoff   = 2 * time.Second
)

// growthBackoff is the wait after refusals refusals in a row (at least 1).
func growthBackoff(refusals int) time.Duration {
	wait := firstGrowthBackoff
	for range refusals - 1 {
		if wait >= maxGrowthBackoff {
			break
		}
		wait *= 2
	}
	return min(wait, maxGrowthBackoff)
}

// ProposeISR returns the ISR this leader should ask the controller for, with the epochs to send,
// and marks it pending; ok is false when nothing should change or a proposal is in flight.
func (r *Replica) ProposeISR(now time.Time, lagMax time.Duration) (isr []int32, leaderEpoch, partitionEpoch int32, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.role != RoleLeader || r.mu.pendingISR != nil {
		return nil, 0, 0, false
	}
	next := desiredISR(now, lagMax, r.grace, r.nodeID, r.mu.replicas, r.mu.isr, r.mu.followers, r.highWatermark.Load(), r.mu.epochStart)
	if !slices.ContainsFunc(next, func(id int32) bool { return !slices.Contains(r.mu.isr, id) }) {
		r.mu.growRefusals = 0 // nobody waits to join (any more)
	}
	if now.Before(r.mu.growAfter) {
		next = slices.DeleteFunc(next, func(id int32) bool { return !slices.Contains(r.mu.isr, id) })
	}
	if sameMembers(next, r.mu.isr) {
		return nil, 0, 0, false
	}
	r.mu.pendingISR = next
	return slices.Clone(next), r.mu.leaderEpoch, r.mu.partitionEpoch, true
}

// ProposalFailed clears a pending ISR proposal that the controller refused or never answered. If
// it added members, none is added for a while (growthBackoff): the controller refuses a fenced
// broker, which may well be fetching and caught up (its Raft store failed, say), and asking again
// at every ISR check only floods the controller and the log. The first wait is short, as a broker
// that has just restarted catches up within moments of its unfencing, and the ISR should not stay
// below min.insync.replicas for long after that.
func (r *Replica) ProposalFailed(now time.Time) {
	r.mu.Lock()
	if slices.ContainsFunc(r.mu.pendingISR, func(id int32) bool { return !slices.Contains(r.mu.isr, id) }) {
		r.mu.growRefusals++
		r.mu.growAfter = now.Add(growthBackoff(r.mu.growRefusals))
	}
	r.mu.pendingISR = nil
	fired := r.advanceLocked()
	r.mu.Unlock()
	answerAll(fired)
}

// advanceLocked recomputes the watermarks and returns the waiters now answered.
func (r *Replica) advanceLocked() []firedWaiter {
	if r.mu.role != RoleLeader {
		return nil
	}
	members := r.mu.isr
	if r.mu.pendingISR != nil {
		members = union(r.mu.isr, r.mu.pendingISR)
	}
	logEnd := r.Log.LogEndOffset()
	flushed := r.Log.FlushedOffset()
	previousHigh := min(r.highWatermark.Load(), logEnd)
	high, durable := watermarks(r.nodeID, logEnd, flushed, members, r.mu.followers, previousHigh, min(r.mu.durableWatermark, logEnd))
	if high != r.highWatermark.Load() {
		r.highWatermark.Store(high)
	}
	r.mu.durableWatermark = durable
	if len(r.mu.waiters) == 0 {
		return nil
	}
	acked := durable
	if r.ackMode == AckMemory {
		acked = high
	}
	if r.unsafeAck {
		acked = unsafeLeaderOnlyAcked(logEnd)
	}
	var fired []firedWaiter
	kept := r.mu.waiters[:0]
	for _, w := range r.mu.waiters {
		if w.lastOffset >= acked {
			kept = append(kept, w)
			continue
		}
		var err error
		if len(r.mu.isr) < w.minInsync {
			err = fmt.Errorf("replication: %s-%d: ISR %v below min.insync.replicas %d: %w", r.Topic, r.Partition, r.mu.isr, w.minInsync, protocol.NotEnoughReplicasAfterAppend)
		}
		r.observeAnswered(&w) // ack_wait.go
		fired = append(fired, firedWaiter{done: w.done, err: err})
	}
	clear(r.mu.waiters[len(kept):])
	r.mu.waiters = kept
	return fired
}

type firedWaiter struct {
	done func(error)
	err  error
}

func answerAll(fired []firedWaiter) {
	for _, f := range fired {
		f.done(f.err)
	}
}

func answer(waiters []ackWaiter, err error) {
	for _, w := range waiters {
		w.done(err)
	}
}

// AppendFromLeader appends batches fetched from the leader, byte for byte at the leader's offsets
// and epochs: records must start at this replica's log end. A trailing partial batch (allowed in
// fetch responses) is ignored. It returns the new log end.
func (r *Replica) AppendFromLeader(records []byte) (int64, error) {
	r.appendGate.RLock()
	defer r.appendGate.RUnlock()
	role, _, _ := r.State()
	if role != RoleFollower {
		return r.Log.LogEndOffset(), notLeader(r)
	}
	for {
		// A retried fetch may bring batches this log already has: skip them whole.
		records = skipBelow(records, r.Log.LogEndOffset())
		run, epoch, base, rest, err := sameEpochRun(records)
		if err != nil {
			return r.Log.LogEndOffset(), err
		}
		if run == nil {
			break // nothing left, or a partial batch at the end
		}
		if end := r.Log.LogEndOffset(); base != end {
			return end, fmt.Errorf("replication: %s-%d: leader sent offset %d, log ends at %d", r.Topic, r.Partition, base, end)
		}
		if err := r.Epochs.Assign(epoch, base); err != nil {
			return r.Log.LogEndOffset(), err
		}
		if _, err := r.Log.Append(run, epoch); err != nil {
			return r.Log.LogEndOffset(), fmt.Errorf("replication: %s-%d: append from leader: %w", r.Topic, r.Partition, err)
		}
		records = rest
	}
	return r.Log.LogEndOffset(), nil
}

// sameEpochRun splits off the leading whole batches that share one leader epoch. run is nil when
// records start with a partial batch.
func sameEpochRun(records []byte) (run []byte, epoch int32, base int64, rest []byte, err error) {
	position := 0
	epoch = -1
	for position < len(records) {
		h, err := batch.ParseHeader(records[position:])
		if errors.Is(err, batch.ErrTruncated) || (err == nil && position+h.Size() > len(records)) {
			break
		}
		if err != nil {
			return nil, 0, 0, nil, fmt.Errorf("replication: batch from leader: %w", err)
		}
		if position == 0 {
			epoch, base = h.PartitionLeaderEpoch, h.BaseOffset
		} else if h.PartitionLeaderEpoch != epoch {
			break
		}
		position += h.Size()
	}
	if position == 0 {
		return nil, 0, 0, nil, nil
	}
	return records[:position], epoch, base, records[position:], nil
}

// skipBelow drops the leading whole batches of records that end at or below end.
func skipBelow(records []byte, end int64) []byte {
	for len(records) > 0 {
		h, err := batch.ParseHeader(records)
		if err != nil || h.NextOffset() > end || h.Size() > len(records) {
			break
		}
		records = records[h.Size():]
	}
	return records
}

// ResolveDivergence applies the leader's answer to OffsetForLeaderEpoch about this follower's last
// epoch (leaderEpoch, endOffset; see divergencePoint): it cuts the log and the epoch history at the
// divergence point and reports that point and whether the answer settles it (if not, ask again
// about Epochs.LastEpoch()). Epochs starting at or after the point go even when no record does,
// such as an epoch this node led without writing anything: kept, it would be the next question
// again, and the same answer would come back forever.
func (r *Replica) ResolveDivergence(leaderEpoch int32, endOffset int64) (target int64, settled bool, err error) {
	target, settled = divergencePoint(r.Epochs.Entries(), r.Log.LogEndOffset(), r.Log.LogStartOffset(), leaderEpoch, endOffset)
	if target < r.Log.LogEndOffset() {
		return target, settled, r.TruncateTo(target)
	}
	return target, settled, r.DropEpochsFrom(target)
}

// TruncateTo cuts the follower's log (and epoch history) at offset.
func (r *Replica) TruncateTo(offset int64) error {
	r.appendGate.Lock()
	defer r.appendGate.Unlock()
	if offset >= r.Log.LogEndOffset() {
		return nil
	}
	if err := r.Log.Truncate(offset); err != nil {
		return fmt.Errorf("replication: %s-%d: truncate to %d: %w", r.Topic, r.Partition, offset, err)
	}
	if err := r.Epochs.TruncateTo(r.Log.LogEndOffset()); err != nil {
		return err
	}
	if r.highWatermark.Load() > r.Log.LogEndOffset() {
		r.highWatermark.Store(r.Log.LogEndOffset())
	}
	return nil
}

// DropEpochsFrom drops the epochs of a follower's history that start at or after offset, which is
// its log end: they hold no records (the divergence search settles on an older epoch). It does
// nothing once the replica no longer follows (a new leader epoch may start there).
func (r *Replica) DropEpochsFrom(offset int64) error {
	r.appendGate.Lock()
	defer r.appendGate.Unlock()
	role, _, _ := r.State()
	if role != RoleFollower || offset < r.Log.LogEndOffset() {
		return nil
	}
	return r.Epochs.TruncateTo(offset)
}

// SetFollowerHighWatermark takes the leader's high watermark, capped at this log's end.
func (r *Replica) SetFollowerHighWatermark(leaderHigh int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.role != RoleFollower {
		return
	}
	r.highWatermark.Store(max(min(leaderHigh, r.Log.LogEndOffset()), r.Log.LogStartOffset()))
}
