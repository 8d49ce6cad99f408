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
// partition's leader) and awaited like an acks=all produce, then the Complete* record is stored,
// then EndTxn is answered. A decision whose markers could not all be written is left in Prepare*
// and finished by the checker, which also aborts transactions open past their timeout (bumping the
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
	b       *Broker
	config  TransactionConfig
	locks   sync.Map // transactional id -> *sync.Mutex
	batcher *txnBatcher
	markers *markerSender

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
			if r, _ := transactions.Lookup(id); r.State == txn.Ongoing || r.State.Preparing() {
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

// current reads an id's record: nil metadata and version 0 when unknown.
func (c *txnCoordinator) current(id string) (*txn.Metadata, uint64) {
	record, ok := c.b.coordinator.Transactions().Lookup(id)
	if !ok {
		return nil, 0
	}
	return &record.Metadata, record.Version
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
	_, version := c.current(m.TransactionalID)
	return version, nil
}

// checkOwner answers NOT_COORDINATOR for an id another broker coordinates.
func (c *txnCoordinator) checkOwner(id string) error {
	if id == "" {
		return fmt.Errorf("broker: empty transactional id: %w", protocol.InvalidRequest)
	}
	return c.b.checkCoordinator(id)
}

// complete writes the markers of a Prepare* transaction and stores its Complete* state. Called
// with the id's lock held. It returns an error when some marker could not be written within its
// attempts; the transaction then stays decided, for the checker to finish.
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
	if _, err := c.store(txn.Complete(m, time.Now().UnixMilli()), version); err != nil {
		return err
	}
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
	m, version := c.current(id)
	if m == nil {
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
