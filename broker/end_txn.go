package broker

// EndTxn v0-v4: commit or abort the producer's transaction. The decision (PrepareCommit or
// PrepareAbort) is stored first; a commit's staged offsets become visible in that same Raft entry.
// Then the markers go to every partition and the Complete state is stored, and only then is the
// request answered, so a producer that got its answer finds its records readable. When markers
// cannot be written for a while (a partition without a leader), the answer is sent with the
// decision stored and the checker finishes the transaction. A retried EndTxn of a completed
// transaction succeeds. Refusals: another producer id INVALID_PRODUCER_ID_MAPPING; another epoch
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2); no open transaction, or the opposite outcome
// of a completed one, INVALID_TXN_STATE; being completed CONCURRENT_TRANSACTIONS; not this broker's
// id NOT_COORDINATOR.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/txn"
)

func (b *Broker) handleEndTxn(r *request, req *kmsg.EndTxnRequest) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = txnErrorCode(b.endTxn(req), req.Version, 2)
	if resp.ErrorCode != 0 {
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) endTxn(req *kmsg.EndTxnRequest) error {
	c := b.txns
	if err := c.checkOwner(req.TransactionalID); err != nil {
		return err
	}
	unlock := c.lock(req.TransactionalID)
	defer unlock()
	current, version := c.current(req.TransactionalID)
	next, action, err := txn.End(current, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, time.Now().UnixMilli())
	if err != nil || action == txn.EndDone {
		return err
	}
	if version, err = c.store(next, version); err != nil {
		return err
	}
	if err := c.complete(next, version); err != nil {
		b.logger.Warn("transaction decided, markers pending", "transactional_id", req.TransactionalID, "state", next.State, "err", err)
	}
	return nil
}
