package replication

// Damaged leader logs.
//
// A leader whose log holds damaged data below its end (a range recovery found invalid after a
// crash, kept in place; reads of it fail with segment.ErrCorrupt) cannot serve that range to a
// follower, which gets CORRUPT_MESSAGE for every fetch of it. Fetching again never helps, and as
// long as the damaged replica leads the follower never catches up. Kafka's answer to a leader that
// cannot read its own log is to take the replica offline so that leadership moves; sluice does the
// same for the one partition:
//
//   - Leader side: the broker reports a follower fetch that failed on the leader's own damaged data
//     (LeaderReadDamaged). The replica remembers the lowest such offset, the failure is logged and
//     counted, and the leader asks the controller (Config's Resigner, SetResigner) to hand
//     leadership to another live in-sync replica, leaving the ISR itself. With no such replica the
//     controller refuses and the leader keeps serving what it can; it asks again after
//     resignRetryInterval.
//   - Follower side: a fetch answered CORRUPT_MESSAGE pauses the partition for
//     damagedLeaderBackoff (no tight retry loop) with a rate-limited log line and a counter, until
//     the metadata names a new leader.
//   - The damaged replica, now a follower, truncates its log at its first damaged offset (or the
//     lowest offset it failed to serve, whichever is lower) before fetching, after its divergence
//     point is settled; it fetches the range again from the new leader and rejoins the ISR with an
//     intact copy.

import (
	"context"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Resigner asks the controller to move leadership of a partition off this node (the leader at
// leaderEpoch) to another live in-sync replica: the coordinator's ResignLeadership.
type Resigner func(ctx context.Context, topic string, partition, leaderEpoch int32) error

const (
	// resignRetryInterval is the least time between two resignation attempts for one partition.
	resignRetryInterval = 2 * time.Second
	// resignTimeout bounds one attempt.
	resignTimeout = 10 * time.Second
	// damagedLeaderBackoff is a follower's pause after its leader answered CORRUPT_MESSAGE.
	damagedLeaderBackoff = time.Second
	// damageLineInterval rate-limits the log lines about one partition's damage.
	damageLineInterval = 30 * time.Second
)

// recovery is the Manager's state for log resets (catch_up.go) and damaged leader logs.
type recovery struct {
	// sluice_replication_log_resets_total: follower logs restarted at the leader's log start.
	logResets *metrics.Counter
	// sluice_replication_damaged_reads_total: follower fetches this node, leading, could not serve
	// because its own log is damaged there.
	damagedReads *metrics.Counter
	// sluice_replication_leader_damaged_total: fetches this node, following, got CORRUPT_MESSAGE.
	leaderDamaged *metrics.Counter
	// sluice_replication_leader_resignations_total: leaderships this node handed off for damage
	// or a failed log (failed_copy.go).
	resignations *metrics.Counter
	// sluice_replication_damage_truncations_total: follower logs truncated at damaged data.
	damageTruncations *metrics.Counter

	mu struct {
		sync.Mutex
		resigner Resigner
		// damagedFrom is the lowest offset each replica failed to serve from its own log.
		damagedFrom map[partitionKey]int64
		lastResign  map[partitionKey]time.Time
		lastLine    map[partitionKey]time.Time
	}
	// running counts resignation calls in flight; Manager.Close waits for them.
	running sync.WaitGroup
}

// init registers the metrics in set and makes the maps.
func (rc *recovery) init(set *metrics.Set) {
	rc.logResets = set.GetOrCreateCounter("sluice_replication_log_resets_total")
	rc.damagedReads = set.GetOrCreateCounter("sluice_replication_damaged_reads_total")
	rc.leaderDamaged = set.GetOrCreateCounter("sluice_replication_leader_damaged_total")
	rc.resignations = set.GetOrCreateCounter("sluice_replication_leader_resignations_total")
	rc.damageTruncations = set.GetOrCreateCounter("sluice_replication_damage_truncations_total")
	rc.mu.damagedFrom = map[partitionKey]int64{}
	rc.mu.lastResign = map[partitionKey]time.Time{}
	rc.mu.lastLine = map[partitionKey]time.Time{}
}

// SetResigner sets how leaders with damaged logs hand leadership off (nil: they do not).
func (m *Manager) SetResigner(resign Resigner) {
	m.recovery.mu.Lock()
	defer m.recovery.mu.Unlock()
	m.recovery.mu.resigner = resign
}

// allowLine reports whether a line about key may be logged now (one per damageLineInterval).
func (rc *recovery) allowLine(key partitionKey, now time.Time) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if last, ok := rc.mu.lastLine[key]; ok && now.Sub(last) < damageLineInterval {
		return false
	}
	rc.mu.lastLine[key] = now
	return true
}

// LeaderReadDamaged reports that r, leading, could not serve a follower's fetch at offset because
// its own log is damaged there (segment.ErrCorrupt). It asks the controller, in the background, to
// move leadership to another in-sync replica; see the comment at the top of damage.go.
func (m *Manager) LeaderReadDamaged(r *Replica, offset int64, cause error) {
	key := keyOf(r)
	m.recovery.damagedReads.Inc()
	rc := &m.recovery
	rc.mu.Lock()
	if from, ok := rc.mu.damagedFrom[key]; !ok || offset < from {
		rc.mu.damagedFrom[key] = offset
	}
	rc.mu.Unlock()
	m.resign(r, time.Now(), "a damaged log", func(epoch int32) {
		m.logger.Error("replication: this leader cannot read its own log to serve a follower (damaged data); asking the controller to move leadership to an in-sync replica with an intact copy",
			"topic", r.Topic, "partition", r.Partition, "offset", offset, "leader_epoch", epoch, "err", cause)
	})
}

// resign asks the controller, in the background, to move r's leadership to another live in-sync
// replica, if r leads and it was not asked for r within resignRetryInterval. announce logs why
// (rate-limited per partition) before the request goes out; what names the trouble in the warning
// logged when the controller refuses.
func (m *Manager) resign(r *Replica, now time.Time, what string, announce func(leaderEpoch int32)) {
	key := keyOf(r)
	role, _, epoch := r.State()
	rc := &m.recovery
	rc.mu.Lock()
	resign := rc.mu.resigner
	due := role == RoleLeader && resign != nil && now.Sub(rc.mu.lastResign[key]) >= resignRetryInterval
	if due {
		rc.mu.lastResign[key] = now
	}
	rc.mu.Unlock()
	if !due {
		return
	}
	if rc.allowLine(key, now) {
		announce(epoch)
	}
	m.mu.Lock()
	closed := m.mu.closed
	if !closed {
		rc.running.Add(1)
	}
	m.mu.Unlock()
	if closed {
		return
	}
	go func() {
		defer rc.running.Done()
		ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
		defer cancel()
		go func() { // ends with ctx, at the latest when this call returns
			select {
			case <-m.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := resign(ctx, r.Topic, r.Partition, epoch); err != nil {
			m.logger.Warn("replication: the controller did not move leadership off "+what+"; serving what it can and asking again",
				"topic", r.Topic, "partition", r.Partition, "leader_epoch", epoch, "retry_in", resignRetryInterval, "err", err)
			return
		}
		rc.resignations.Inc()
	}()
}

// leaderLogDamaged handles CORRUPT_MESSAGE from the leader for a follower partition: count, log
// now and then, and pause the partition (the leader asks to be replaced; Follow brings the new one).
func (f *fetcher) leaderLogDamaged(p *followed) time.Duration {
	r := p.replica
	f.manager.recovery.leaderDamaged.Inc()
	if f.manager.recovery.allowLine(keyOf(r), time.Now()) {
		f.manager.logger.Error("replication: the leader cannot serve its log at this follower's fetch offset (CORRUPT_MESSAGE: its copy is damaged); retrying slowly until leadership moves to an intact replica",
			"topic", r.Topic, "partition", r.Partition, "leader", f.leaderID, "fetch_offset", r.Log.LogEndOffset(), "retry_in", damagedLeaderBackoff)
	}
	return damagedLeaderBackoff
}

// truncateDamaged cuts a follower's log at its first damaged offset, or the lowest offset it failed
// to serve as leader, so that it fetches that range again from its leader. It runs once the
// divergence point is settled.
func (f *fetcher) truncateDamaged(p *followed) {
	r := p.replica
	key := keyOf(r)
	target, damaged := r.Log.FirstDamagedOffset()
	rc := &f.manager.recovery
	rc.mu.Lock()
	if from, ok := rc.mu.damagedFrom[key]; ok {
		if !damaged || from < target {
			target = from
		}
		damaged = true
		delete(rc.mu.damagedFrom, key)
	}
	rc.mu.Unlock()
	logEnd := r.Log.LogEndOffset()
	if !damaged || target >= logEnd {
		return
	}
	target = max(target, r.Log.LogStartOffset())
	f.manager.logger.Warn("replication: truncating a follower's log at damaged data, to fetch it again from the leader",
		"topic", r.Topic, "partition", r.Partition, "from", logEnd, "to", target, "leader", f.leaderID)
	if err := r.TruncateTo(target); err != nil {
		f.manager.logger.Error("replication: truncate at damaged data", "topic", r.Topic, "partition", r.Partition, "err", err)
		p.pausedUntil = time.Now().Add(f.manager.config.RetryBackoff)
		return
	}
	rc.damageTruncations.Inc()
	f.manager.observeTruncation()
}
