package broker

// AddOffsetsToTxn v0-v4: the transaction will commit offsets of a group (TxnOffsetCommit, sent to
// the group's coordinator next). Kafka adds the group's __consumer_offsets partition to the
// transaction; here offsets live in Raft, so the group itself is recorded and no marker is needed
// for it: the entry that decides the commit also makes the offsets visible. Refusals as
// AddPartitionsToTxn, plus an empty group id INVALID_GROUP_ID.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/txn"
)

func (b *Broker) handleAddOffsetsToTxn(r *request, req *kmsg.AddOffsetsToTxnRequest) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = txnErrorCode(b.addOffsetsToTxn(req), req.Version, 2)
	if resp.ErrorCode != 0 {
		r.failed()
	}
	r.respond(resp)
}

func (b *Broker) addOffsetsToTxn(req *kmsg.AddOffsetsToTxnRequest) error {
	if req.Group == "" {
		return fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	c := b.txns
	if err := c.checkOwner(req.TransactionalID); err != nil {
		return err
	}
	unlock := c.lock(req.TransactionalID)
	defer unlock()
	current, version := c.current(req.TransactionalID)
	next, changed, err := txn.AddGroup(current, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, time.Now().UnixMilli())
	if err != nil || !changed {
		return err
	}
	_, err = c.store(next, version)
	return err
}
