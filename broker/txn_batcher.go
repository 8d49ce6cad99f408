package broker

// Batching of transaction state writes: every write queued while one is in flight goes into the
// next Raft entry together, so concurrent transactions share Raft rounds (a round costs
// milliseconds). Callers block until their entry applied on this node.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/coordinator"
)

// maxTxnBatch bounds the writes in one entry.
const maxTxnBatch = 512

type txnWriteOutcome struct {
	result coordinator.TransactionWriteResult
	err    error
}

type pendingTxnWrite struct {
	update *coordinator.TransactionUpdate
	stage  *coordinator.StagedOffsets
	done   chan txnWriteOutcome
}

type txnBatcher struct {
	coordinator *coordinator.Coordinator
	queue       chan pendingTxnWrite
	stop        chan struct{}
	done        sync.WaitGroup
}

var errTxnBatcherClosed = errors.New("broker: transaction writes closed")

func newTxnBatcher(c *coordinator.Coordinator) *txnBatcher {
	t := &txnBatcher{coordinator: c, queue: make(chan pendingTxnWrite, maxTxnBatch), stop: make(chan struct{})}
	t.done.Add(1)
	go t.run()
	return t
}

func (t *txnBatcher) close() {
	close(t.stop)
	t.done.Wait()
}

// write stores one update and/or one staging; the result speaks of this write only (Refused
// holds 0 when the staging was refused).
func (t *txnBatcher) write(update *coordinator.TransactionUpdate, stage *coordinator.StagedOffsets) (coordinator.TransactionWriteResult, error) {
	p := pendingTxnWrite{update: update, stage: stage, done: make(chan txnWriteOutcome, 1)}
	select {
	case t.queue <- p:
	case <-t.stop:
		return coordinator.TransactionWriteResult{}, errTxnBatcherClosed
	}
	select {
	case outcome := <-p.done:
		return outcome.result, outcome.err
	case <-t.stop:
		return coordinator.TransactionWriteResult{}, errTxnBatcherClosed
	}
}

func (t *txnBatcher) run() {
	defer t.done.Done()
	for {
		var batch []pendingTxnWrite
		select {
		case first := <-t.queue:
			batch = append(batch, first)
		case <-t.stop:
			return
		}
	gather:
		for len(batch) < maxTxnBatch {
			select {
			case next := <-t.queue:
				batch = append(batch, next)
			default:
				break gather
			}
		}
		t.flush(batch)
	}
}

func (t *txnBatcher) flush(batch []pendingTxnWrite) {
	var write coordinator.TransactionWrite
	stageIndex := make([]int, len(batch)) // batch index -> index in write.Stage, or -1
	for i, p := range batch {
		if p.update != nil {
			write.Updates = append(write.Updates, *p.update)
		}
		stageIndex[i] = -1
		if p.stage != nil {
			stageIndex[i] = len(write.Stage)
			write.Stage = append(write.Stage, *p.stage)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	result, err := t.coordinator.WriteTransactions(ctx, write)
	cancel()
	for i, p := range batch {
		var own coordinator.TransactionWriteResult
		if p.update != nil && slices.Contains(result.Conflicts, p.update.Metadata.TransactionalID) {
			own.Conflicts = []string{p.update.Metadata.TransactionalID}
		}
		if stageIndex[i] >= 0 && slices.Contains(result.Refused, stageIndex[i]) {
			own.Refused = []int{0}
		}
		p.done <- txnWriteOutcome{result: own, err: err}
	}
}
