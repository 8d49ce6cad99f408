package broker

// InitProducerId with a transactional id (txn.Init): the first call for an id gets a fresh producer
// id at epoch 0; later ones bump the epoch, which fences the previous instance of the producer
// (PRODUCER_FENCED on its next request). An instance that finds a transaction still open aborts it
// first, here, at a bumped epoch (its markers written, so nothing of it stays visible), then gets
// its own epoch. Refusals: timeout over --transaction-max-timeout INVALID_TRANSACTION_TIMEOUT; a
// transaction being completed CONCURRENT_TRANSACTIONS (retriable for the client); not this broker's
// id NOT_COORDINATOR; KIP-360 producer id/epoch that are not the id's current ones PRODUCER_FENCED.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/txn"
)

func (b *Broker) initTransactionalProducerID(r *request, req *kmsg.InitProducerIDRequest) (int64, int16, error) {
	id := *req.TransactionalID
	c := b.txns
	if err := c.checkOwner(id); err != nil {
		return 0, 0, err
	}
	unlock := c.lock(id)
	defer unlock()
	request := txn.InitRequest{TransactionalID: id, ProducerID: -1, ProducerEpoch: -1, TimeoutMillis: req.TransactionTimeoutMillis}
	if r.header.APIVersion >= 3 {
		request.ProducerID, request.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	maxTimeout := int32(c.config.MaxTimeout / time.Millisecond)
	for attempt := 0; ; attempt++ {
		current, version := c.current(id)
		request.NowMillis = time.Now().UnixMilli()
		d := txn.Init(current, request, maxTimeout)
		if d.AbortFirst && attempt == 0 {
			// Abort the previous instance's transaction now, then decide again.
			version, err := c.store(d.Next, version)
			if err != nil {
				return 0, 0, err
			}
			if err := c.complete(d.Next, version); err != nil {
				return 0, 0, fmt.Errorf("broker: abort open transaction of %q: %w: %w", id, protocol.ConcurrentTransactions, err)
			}
			// The abort bumped the epoch: a KIP-360 request naming the old one is that epoch's
			// owner, and may continue from the bumped one.
			continue
		}
		if d.Err != nil {
			return 0, 0, d.Err
		}
		if d.NewProducerID {
			ctx, cancel := txnContext()
			fresh, err := b.producerIDs.allocate(ctx)
			cancel()
			if err != nil {
				return 0, 0, err
			}
			d.Next.ProducerID, d.Next.ProducerEpoch = fresh, 0
		}
		if _, err := c.store(d.Next, version); err != nil {
			return 0, 0, err
		}
		return d.Next.ProducerID, d.Next.ProducerEpoch, nil
	}
}
