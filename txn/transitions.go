package txn

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluice-mq/sluice/protocol"
)

// maxEpoch is the largest epoch handed out; Kafka keeps MaxInt16 unused and moves to a new
// producer id instead of reaching it.
const maxEpoch = math.MaxInt16 - 1

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	TransactionalID string
	// ProducerID and ProducerEpoch are -1 unless the producer asks to bump its own (KIP-360).
	ProducerID    int64
	ProducerEpoch int16
	TimeoutMillis int32
	NowMillis     int64
}

// InitDecision is what to do with an InitRequest.
type InitDecision struct {
	// Next is the metadata to persist (when Err is nil, or when AbortFirst).
	Next Metadata
	// NewProducerID: Next needs a fresh producer id (the caller allocates it; epoch 0).
	NewProducerID bool
	// AbortFirst: an Ongoing transaction must be aborted first. Next is its PrepareAbort at a
	// bumped epoch (which fences the old producer); the caller completes the abort and answers Err
	// (CONCURRENT_TRANSACTIONS), and the client retries.
	AbortFirst bool
	Err        error
}

// Init applies InitProducerId to current (nil: an id never seen). maxTimeoutMillis is the broker's
// transaction.max.timeout.ms.
func Init(current *Metadata, req InitRequest, maxTimeoutMillis int32) InitDecision {
	if req.TimeoutMillis <= 0 || req.TimeoutMillis > maxTimeoutMillis {
		return InitDecision{Err: fmt.Errorf("txn: timeout %d ms outside 1..%d: %w", req.TimeoutMillis, maxTimeoutMillis, protocol.InvalidTransactionTimeout)}
	}
	fresh := Metadata{TransactionalID: req.TransactionalID, ProducerID: -1, LastProducerEpoch: -1,
		TimeoutMillis: req.TimeoutMillis, State: Empty, UpdateMillis: req.NowMillis}
	if current == nil {
		return InitDecision{Next: fresh, NewProducerID: true}
	}
	switch current.State {
	case PrepareCommit, PrepareAbort:
		return InitDecision{Err: fmt.Errorf("txn: %q is completing a transaction: %w", req.TransactionalID, protocol.ConcurrentTransactions)}
	case Ongoing:
		next, err := FenceAbort(*current, req.NowMillis, false)
		if err != nil {
			return InitDecision{Err: err}
		}
		return InitDecision{Next: next, AbortFirst: true,
			Err: fmt.Errorf("txn: %q aborts its open transaction first: %w", req.TransactionalID, protocol.ConcurrentTransactions)}
	}
	if req.ProducerID >= 0 {
		sameEpoch := req.ProducerEpoch == current.ProducerEpoch ||
			(current.LastProducerEpoch >= 0 && req.ProducerEpoch == current.LastProducerEpoch)
		if req.ProducerID != current.ProducerID || !sameEpoch {
			return InitDecision{Err: fmt.Errorf("txn: %q is producer %d epoch %d, not %d epoch %d: %w", req.TransactionalID,
				current.ProducerID, current.ProducerEpoch, req.ProducerID, req.ProducerEpoch, protocol.ProducerFenced)}
		}
	}
	if current.ProducerEpoch >= maxEpoch {
		return InitDecision{Next: fresh, NewProducerID: true}
	}
	next := fresh
	next.ProducerID, next.ProducerEpoch = current.ProducerID, current.ProducerEpoch+1
	return InitDecision{Next: next}
}

// epochError answers a request at another epoch than the current one: the epoch the coordinator
// bumped on its own after a timeout gets INVALID_PRODUCER_EPOCH, which KIP-588 clients recover
// from (they abort and re-initialize from it); any other is PRODUCER_FENCED, fatal for the instance.
func epochError(current *Metadata, transactionalID string, epoch int16) error {
	if current.LastProducerEpoch >= 0 && epoch == current.LastProducerEpoch {
		return fmt.Errorf("txn: %q was aborted by its timeout at epoch %d: %w", transactionalID, epoch, protocol.InvalidProducerEpoch)
	}
	return fmt.Errorf("txn: %q is at epoch %d, not %d: %w", transactionalID, current.ProducerEpoch, epoch, protocol.ProducerFenced)
}

// checkProducer is the check every client request of a transaction starts with.
func checkProducer(current *Metadata, transactionalID string, producerID int64, epoch int16) error {
	switch {
	case current == nil || current.ProducerID != producerID:
		return fmt.Errorf("txn: %q is not producer %d: %w", transactionalID, producerID, protocol.InvalidProducerIDMapping)
	case epoch != current.ProducerEpoch:
		return epochError(current, transactionalID, epoch)
	case current.State.Preparing():
		return fmt.Errorf("txn: %q is completing a transaction: %w", transactionalID, protocol.ConcurrentTransactions)
	}
	return nil
}

// AddPartitions applies AddPartitionsToTxn. changed is false when every partition was already in
// the Ongoing transaction (nothing to persist).
func AddPartitions(current *Metadata, transactionalID string, producerID int64, epoch int16, partitions []Partition, nowMillis int64) (next Metadata, changed bool, err error) {
	if err := checkProducer(current, transactionalID, producerID, epoch); err != nil {
		return Metadata{}, false, err
	}
	next = begin(*current, nowMillis)
	var grew bool
	next.Partitions, grew = withPartitions(next.Partitions, partitions)
	return next, grew || current.State != Ongoing, nil
}

// AddGroup applies AddOffsetsToTxn.
func AddGroup(current *Metadata, transactionalID string, producerID int64, epoch int16, group string, nowMillis int64) (next Metadata, changed bool, err error) {
	if err := checkProducer(current, transactionalID, producerID, epoch); err != nil {
		return Metadata{}, false, err
	}
	next = begin(*current, nowMillis)
	if next.HasGroup(group) {
		return next, current.State != Ongoing, nil
	}
	next.Groups = slices.Clone(next.Groups)
	i, _ := slices.BinarySearch(next.Groups, group)
	next.Groups = slices.Insert(next.Groups, i, group)
	return next, true, nil
}

// begin returns m as Ongoing: unchanged when it already is, a new transaction otherwise.
func begin(m Metadata, nowMillis int64) Metadata {
	if m.State == Ongoing {
		return m
	}
	m.State, m.StartMillis, m.UpdateMillis = Ongoing, nowMillis, nowMillis
	m.Partitions, m.Groups = nil, nil
	return m
}

// EndAction is what EndTxn leads to.
type EndAction uint8

const (
	EndPrepare EndAction = iota // persist Next (Prepare*), write the markers, then Complete
	EndDone                     // a retry of an EndTxn that completed: answer success
)

// End applies EndTxn.
func End(current *Metadata, transactionalID string, producerID int64, epoch int16, commit bool, nowMillis int64) (Metadata, EndAction, error) {
	if current == nil || current.ProducerID != producerID {
		return Metadata{}, 0, fmt.Errorf("txn: %q is not producer %d: %w", transactionalID, producerID, protocol.InvalidProducerIDMapping)
	}
	if epoch != current.ProducerEpoch {
		return Metadata{}, 0, epochError(current, transactionalID, epoch)
	}
	switch {
	case current.State == Ongoing:
		next := *current
		next.State, next.UpdateMillis = PrepareAbort, nowMillis
		if commit {
			next.State = PrepareCommit
		}
		return next, EndPrepare, nil
	case commit && current.State == CompleteCommit, !commit && current.State == CompleteAbort:
		return *current, EndDone, nil
	case commit && current.State == PrepareCommit, !commit && current.State == PrepareAbort:
		return Metadata{}, 0, fmt.Errorf("txn: %q is completing: %w", transactionalID, protocol.ConcurrentTransactions)
	}
	return Metadata{}, 0, fmt.Errorf("txn: %q is %s, cannot %s: %w", transactionalID, current.State, endVerb(commit), protocol.InvalidTxnState)
}

func endVerb(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// FenceAbort is the coordinator's own abort of an Ongoing transaction (timedOut, or a new producer
// instance initializing): PrepareAbort at a bumped epoch, so that the old producer's further writes
// and requests are refused. After a timeout LastProducerEpoch keeps the old epoch, so that the
// producer may recover (KIP-588); after fencing by a new instance it must not.
func FenceAbort(m Metadata, nowMillis int64, timedOut bool) (Metadata, error) {
	if m.State != Ongoing {
		return Metadata{}, fmt.Errorf("txn: %q is %s, not Ongoing: %w", m.TransactionalID, m.State, protocol.InvalidTxnState)
	}
	m.LastProducerEpoch = -1
	if m.ProducerEpoch < maxEpoch {
		if timedOut {
			m.LastProducerEpoch = m.ProducerEpoch
		}
		m.ProducerEpoch++
	}
	m.State, m.UpdateMillis = PrepareAbort, nowMillis
	return m, nil
}

// Complete is the state after every marker of a Prepare* transaction is written.
func Complete(m Metadata, nowMillis int64) Metadata {
	switch m.State {
	case PrepareCommit:
		m.State = CompleteCommit
	case PrepareAbort:
		m.State = CompleteAbort
	default:
		panic(fmt.Sprintf("txn: complete of %q in state %s: only Prepare* completes", m.TransactionalID, m.State))
	}
	m.Partitions, m.Groups, m.StartMillis, m.UpdateMillis = nil, nil, 0, nowMillis
	return m
}

// CheckOffsetCommit is the check of TxnOffsetCommit against the transaction (the group coordinator
// checks membership separately): the producer must be current and the group added.
func CheckOffsetCommit(current *Metadata, transactionalID string, producerID int64, epoch int16, group string) error {
	if err := checkProducer(current, transactionalID, producerID, epoch); err != nil {
		return err
	}
	if current.State != Ongoing || !current.HasGroup(group) {
		return fmt.Errorf("txn: %q has not added group %q: %w", transactionalID, group, protocol.InvalidTxnState)
	}
	return nil
}
