package broker

// The transaction coordinator. Each transactional id is coordinated by the broker that coordinates
// the group of the same name (FindCoordinator key type 1, groups.go), so any live broker can take
// over any id: the state is in the Raft coordinator (coordinator/transactions.go), read from this
// node's replica of it. One id's transitions are serialized by a per-id lock held from reading the
// record to storing the next one; the store is a compare-and-set on the record's version, so a
// coordinator that lost the id to another (a broker joined or left) cannot overwrite it
// (NOT_COORDINATOR).
//
// Ending a transaction: the Prepare* record is stored first (the decision), then a marker is
// written to every partition of the transaction (locally, or with WriteTxnMarkers to the
// partition's leader) and awaited like an acks=all produce, then EndTxn is answered. The Complete*
// state is not stored on that path (it would cost a Raft round per transaction): the coordinator
// remembers in memory that the markers of that record version are written, reads the record as
// Complete* from then on, and the next transition of the id (usually the next transaction's
// AddPartitionsToTxn) replaces it in one write; the checker stores Complete* for ids left idle. A
// coordinator that restarts or takes over without that memory writes the markers again (a
// repeated marker closes nothing and changes nothing). A decision whose markers could not all be
// written is left in Prepare* and finished by the checker, which also aborts transactions open past their timeout (bumping the
// producer epoch, which fences the producer) and finishes what a previous coordinator decided but
// did not complete.
//
// Lock order: a transactional id's lock, then partition locks (producerStates.mu) inside the
// marker writes. Raft writes are batched (txn_batcher.go).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/txn"
)

// markerAttempts bounds how long EndTxn retries markers before answering with the decision stored
// (the checker finishes it).
const markerAttempts = 20

type txnCoordinator struct {
	b      *Broker
	config TransactionConfig
	locks  sync.Map // transactional id -> *sync.Mutex
	// markersDone maps a transactional id to the version of its Prepare* record whose markers
	// are all written and acknowledged (see the package comment above).
	markersDone sync.Map
	batcher     *txnBatcher
	markers     *markerSender

	commits  *metrics.Counter
	aborts   *metrics.Counter
	timeouts *metrics.Counter
}

func newTxnCoordinator(b *Broker, set *metrics.Set) *txnCoordinator {
	c := &txnCoordinator{b: b, config: b.config.Transactions}
	c.batcher = newTxnBatcher(b.coordinator)
	c.markers = newMarkerSender(b)
	c.commits = set.NewCounter("sluice_transactions_committed_total")
	c.aborts = set.NewCounter("sluice_transactions_aborted_total")
	c.timeouts = set.NewCounter("sluice_transactions_timed_out_total")
	set.NewGauge("sluice_transactions_open", func() float64 {
		open := 0
		transactions := b.coordinator.Transactions()
		for _, id := range transactions.IDs() {
			if c.checkOwner(id) != nil {
				continue // another broker coordinates it (and counts it)
			}
			if r, _ := c.current(id); r != nil && (r.State == txn.Ongoing || r.State.Preparing()) {
				open++
			}
		}
		return float64(open)
	})
	return c
}

func (c *txnCoordinator) close() {
	c.batcher.close()
	c.markers.close()
}

// lock takes a transactional id's lock.
func (c *txnCoordinator) lock(id string) func() {
	m, _ := c.locks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// tryLock takes the lock if it is free.
func (c *txnCoordinator) tryLock(id string) (func(), bool) {
	m, _ := c.locks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	if !mu.TryLock() {
		return nil, false
	}
	return mu.Unlock, true
}

// current reads an id's record as the transitions see it: nil metadata and version 0 when
// unknown; a Prepare* record whose markers are written reads as its Complete* state.
func (c *txnCoordinator) current(id string) (*txn.Metadata, uint64) {
	m, version, _ := c.stored(id)
	if m != nil && m.State.Preparing() && c.markersWritten(id, version) {
		done := txn.Complete(*m, m.UpdateMillis)
		return &done, version
	}
	return m, version
}

// stored reads an id's record as stored.
func (c *txnCoordinator) stored(id string) (*txn.Metadata, uint64, bool) {
	record, ok := c.b.coordinator.Transactions().Lookup(id)
	if !ok {
		return nil, 0, false
	}
	return &record.Metadata, record.Version, true
}

func (c *txnCoordinator) markersWritten(id string, version uint64) bool {
	done, ok := c.markersDone.Load(id)
	return ok && done.(uint64) == version
}

// store writes m if the record is still at basedOn, and returns the new version.
func (c *txnCoordinator) store(m txn.Metadata, basedOn uint64) (uint64, error) {
	result, err := c.batcher.write(&coordinator.TransactionUpdate{Metadata: m, BasedOn: basedOn}, nil)
	if err != nil {
		return 0, fmt.Errorf("broker: store transaction %q: %w: %w", m.TransactionalID, protocol.CoordinatorNotAvailable, err)
	}
	if len(result.Conflicts) > 0 {
		return 0, fmt.Errorf("broker: transaction %q changed under this coordinator: %w", m.TransactionalID, protocol.NotCoordinator)
	}
	_, version, _ := c.stored(m.TransactionalID)
	return version, nil
}

// checkOwner answers NOT_COORDINATOR for an id another broker coordinates.
func (c *txnCoordinator) checkOwner(id string) error {
	if id == "" {
		return fmt.Errorf("broker: empty transactional id: %w", protocol.InvalidRequest)
	}
	return c.b.checkCoordinator(id)
}

// complete writes the markers of a Prepare* transaction (stored at version) and notes them written,
// which completes it (see the package comment). Called with the id's lock held. It returns an error
// when some marker could not be written within its attempts; the transaction then stays decided,
// for the checker to finish.
func (c *txnCoordinator) complete(m txn.Metadata, version uint64) error {
	commit := m.State == txn.PrepareCommit
	var err error
	for attempt := range markerAttempts {
		if err = c.markers.send(m.ProducerID, m.ProducerEpoch, commit, m.Partitions); err == nil {
			break
		}
		if errors.Is(err, protocol.InvalidProducerEpoch) {
			break // a newer epoch wrote there: this decision is stale, nothing to retry
		}
		select {
		case <-c.b.stop:
			return err
		case <-time.After(time.Duration(10*(attempt+1)) * time.Millisecond):
		}
	}
	if err != nil {
		return err
	}
	c.markersDone.Store(m.TransactionalID, version)
	if commit {
		c.commits.Inc()
	} else {
		c.aborts.Inc()
	}
	return nil
}

// runChecker aborts expired transactions and finishes decided ones, every CheckInterval, for the
// ids this broker coordinates; it also checkpoints partitions' transaction state.
func (c *txnCoordinator) runChecker() {
	defer c.b.background.Done()
	ticker := time.NewTicker(c.config.CheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-c.b.stop:
			return
		case <-ticker.C:
		}
		c.checkOnce(time.Now())
		c.b.registry.forEach(func(p *partition) {
			if err := p.checkpointTxns(); err != nil {
				c.b.logger.Warn("transaction checkpoint", "topic", p.topic, "partition", p.index, "err", err)
			}
		})
	}
}

func (c *txnCoordinator) checkOnce(now time.Time) {
	if !c.b.coordinator.IsLeader() && c.b.coordinator.Metadata().ControllerID < 0 {
		return // no controller: nothing can be stored
	}
	transactions := c.b.coordinator.Transactions()
	for _, id := range transactions.IDs() {
		record, _ := transactions.Lookup(id)
		if !record.State.Preparing() && !record.Expired(now.UnixMilli()) {
			continue
		}
		if c.checkOwner(id) != nil {
			continue
		}
		unlock, ok := c.tryLock(id)
		if !ok {
			continue // a request is working on it
		}
		c.finishOrExpire(id, now)
		unlock()
	}
}

// finishOrExpire runs with the id's lock held.
func (c *txnCoordinator) finishOrExpire(id string, now time.Time) {
	m, version, _ := c.stored(id)
	if m == nil {
		return
	}
	if m.State.Preparing() && c.markersWritten(id, version) {
		// Completed in memory; store it once the id has been idle for a check interval.
		if now.UnixMilli()-m.UpdateMillis > c.config.CheckInterval.Milliseconds() {
			if _, err := c.store(txn.Complete(*m, now.UnixMilli()), version); err != nil {
				c.b.logger.Warn("transaction completion", "transactional_id", id, "err", err)
			}
		}
		return
	}
	if m.Expired(now.UnixMilli()) {
		next, err := txn.FenceAbort(*m, now.UnixMilli(), true)
		if err != nil {
			return
		}
		if version, err = c.store(next, version); err != nil {
			c.b.logger.Warn("transaction timeout abort", "transactional_id", id, "err", err)
			return
		}
		c.timeouts.Inc()
		c.b.logger.Info("aborting transaction past its timeout", "transactional_id", id, "producer_id", m.ProducerID,
			"timeout_ms", m.TimeoutMillis, "partitions", len(m.Partitions))
		m = &next
	}
	if m.State.Preparing() {
		if err := c.complete(*m, version); err != nil {
			c.b.logger.Warn("transaction completion", "transactional_id", id, "state", m.State, "err", err)
		}
	}
}

// ctx bounds a producer id allocation.
func txnContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}
