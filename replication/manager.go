package replication

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/protocol"
)

// ISRProposer sends a leader's ISR change to the controller (the coordinator's AlterPartition).
type ISRProposer func(ctx context.Context, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32) error

// Manager runs this broker's side of replication: one fetcher per leader that this broker follows,
// and the leaders' ISR checks. Its goroutines stop in Close.
type Manager struct {
	config     Config
	logger     *slog.Logger
	addressOf  func(nodeID int32) (string, bool)
	proposeISR ISRProposer
	// reportUnreachable tells the controller of a leader this broker cannot reach; set once by
	// SetUnreachableReporter before any fetcher starts, nil: never reported.
	reportUnreachable func(leaderID int32)

	fetchedBytes *metrics.Counter
	truncations  *metrics.Counter
	isrShrinks   *metrics.Counter
	isrExpands   *metrics.Counter
	// recovery: resets behind the leader's log start and damaged leader logs (catch_up.go, damage.go).
	recovery recovery

	mu struct {
		sync.Mutex
		fetchers map[int32]*fetcher
		// followed holds the current fetch state of each follower replica, by leader.
		followed map[int32]map[partitionKey]*followed
		leading  map[partitionKey]*Replica
		closed   bool
		lastLog  time.Time
	}
	stop chan struct{}
	done chan struct{}
	// fetchers counts running fetcher goroutines, including stopped ones still exiting.
	fetchersRunning sync.WaitGroup
}

// NewManager starts the ISR checker. addressOf resolves a broker's Kafka listener address;
// proposeISR reaches the controller. set receives the metrics (nil: a private set).
func NewManager(cfg Config, addressOf func(int32) (string, bool), proposeISR ISRProposer, set *metrics.Set, logger *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if set == nil {
		set = metrics.NewSet()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		config: cfg, logger: logger, addressOf: addressOf, proposeISR: proposeISR,
		fetchedBytes: set.GetOrCreateCounter("sluice_replication_fetched_bytes_total"),
		truncations:  set.GetOrCreateCounter("sluice_replication_truncations_total"),
		isrShrinks:   set.GetOrCreateCounter("sluice_isr_shrinks_total"),
		isrExpands:   set.GetOrCreateCounter("sluice_isr_expands_total"),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	m.mu.fetchers = map[int32]*fetcher{}
	m.mu.followed = map[int32]map[partitionKey]*followed{}
	m.mu.leading = map[partitionKey]*Replica{}
	m.recovery.init(set)
	go m.runISRChecks()
	return m, nil
}

// SetUnreachableReporter sets how a leader that stays silent is reported (see
// Config.LeaderUnreachableAfter). Call it before the first Follow; report must not block long.
func (m *Manager) SetUnreachableReporter(report func(leaderID int32)) { m.reportUnreachable = report }

func keyOf(r *Replica) partitionKey { return partitionKey{r.Topic, r.Partition} }

// Lead registers r (already made leader) for ISR checks and stops following it.
func (m *Manager) Lead(r *Replica) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return
	}
	m.unfollowLocked(keyOf(r))
	m.mu.leading[keyOf(r)] = r
}

// Follow makes r (already made follower) fetch from leaderID at leaderEpoch. With resync it first
// finds its divergence point with the leader. A leader of -1 (offline) stops fetching.
func (m *Manager) Follow(r *Replica, leaderID, leaderEpoch int32, resync bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return
	}
	key := keyOf(r)
	delete(m.mu.leading, key)
	current := m.findLocked(key)
	if current != nil && !resync && current.leaderEpoch == leaderEpoch && m.mu.followed[leaderID][key] == current {
		return
	}
	m.unfollowLocked(key)
	if leaderID < 0 {
		return
	}
	byKey := m.mu.followed[leaderID]
	if byKey == nil {
		byKey = map[partitionKey]*followed{}
		m.mu.followed[leaderID] = byKey
	}
	byKey[key] = &followed{replica: r, leaderEpoch: leaderEpoch, needsEpochCheck: true, reportedDurable: -1}
	f := m.mu.fetchers[leaderID]
	if f == nil {
		f = &fetcher{manager: m, leaderID: leaderID, logger: m.logger, lastHeard: time.Now(), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		m.mu.fetchers[leaderID] = f
		m.fetchersRunning.Add(1)
		go func() {
			defer m.fetchersRunning.Done()
			f.run()
		}()
	}
	f.poke()
}

// Forget stops every activity for r (deleted, or no longer a replica here).
func (m *Manager) Forget(r *Replica) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mu.leading, keyOf(r))
	m.unfollowLocked(keyOf(r))
}

func (m *Manager) findLocked(key partitionKey) *followed {
	for _, byKey := range m.mu.followed {
		if p, ok := byKey[key]; ok {
			return p
		}
	}
	return nil
}

// unfollowLocked removes key from its fetcher; a fetcher left with nothing stops.
func (m *Manager) unfollowLocked(key partitionKey) {
	for leaderID, byKey := range m.mu.followed {
		if _, ok := byKey[key]; !ok {
			continue
		}
		delete(byKey, key)
		if len(byKey) == 0 {
			delete(m.mu.followed, leaderID)
			if f := m.mu.fetchers[leaderID]; f != nil {
				delete(m.mu.fetchers, leaderID)
				close(f.stop)
				// Its goroutine exits on its own; Close waits for the ones still registered.
			}
		}
	}
}

func (m *Manager) partitionsOf(leaderID int32) []*followed {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*followed, 0, len(m.mu.followed[leaderID]))
	for _, p := range m.mu.followed[leaderID] {
		out = append(out, p)
	}
	return out
}

// stillFollowing reports whether p is still the current fetch state of its replica.
func (m *Manager) stillFollowing(p *followed) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.findLocked(keyOf(p.replica)) == p
}

func (m *Manager) observeFetched(bytes int) { m.fetchedBytes.Add(bytes) }
func (m *Manager) observeTruncation()       { m.truncations.Inc() }

func (m *Manager) logFetchError(leaderID int32, err error) {
	m.mu.Lock()
	quiet := time.Since(m.mu.lastLog) < 5*time.Second
	if !quiet {
		m.mu.lastLog = time.Now()
	}
	m.mu.Unlock()
	if !quiet {
		m.logger.Warn("replication: fetching from leader failed; retrying", "leader", leaderID, "err", err)
	}
}

// runISRChecks asks each led partition whether its ISR should change, and proposes the changes.
func (m *Manager) runISRChecks() {
	defer close(m.done)
	ticker := time.NewTicker(m.config.ISRCheckInterval)
	defer ticker.Stop()
	var proposals sync.WaitGroup
	defer proposals.Wait()
	for {
		select {
		case <-m.stop:
			return
		case <-ticker.C:
		}
		m.mu.Lock()
		leading := make([]*Replica, 0, len(m.mu.leading))
		for _, r := range m.mu.leading {
			leading = append(leading, r)
		}
		m.mu.Unlock()
		now := time.Now()
		m.resignFailedLeaders(leading, now) // failed_copy.go
		for _, r := range leading {
			previous := r.ISR()
			isr, leaderEpoch, partitionEpoch, ok := r.ProposeISR(now, m.config.LagTimeMax)
			if !ok {
				continue
			}
			if len(isr) < len(previous) {
				m.isrShrinks.Inc()
			} else {
				m.isrExpands.Inc()
			}
			m.logger.Info("replication: proposing an ISR change", "topic", r.Topic, "partition", r.Partition, "from", previous, "to", isr, "leader_epoch", leaderEpoch)
			proposals.Add(1)
			go func() {
				defer proposals.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := m.proposeISR(ctx, r.Topic, r.Partition, leaderEpoch, partitionEpoch, isr); err != nil {
					m.logger.Warn("replication: ISR change refused", "topic", r.Topic, "partition", r.Partition, "isr", isr, "err", err)
					r.ProposalFailed(time.Now())
				}
			}()
		}
	}
}

// Close stops every fetcher and the ISR checker, and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return
	}
	m.mu.closed = true
	fetchers := m.mu.fetchers
	m.mu.fetchers = map[int32]*fetcher{}
	m.mu.followed = map[int32]map[partitionKey]*followed{}
	m.mu.Unlock()
	close(m.stop)
	for _, f := range fetchers {
		close(f.stop)
	}
	m.fetchersRunning.Wait()
	m.recovery.running.Wait()
	<-m.done
}

// IsNotLeader reports whether err means the replica does not (or no longer) lead.
func IsNotLeader(err error) bool { return errors.Is(err, protocol.NotLeaderOrFollower) }
