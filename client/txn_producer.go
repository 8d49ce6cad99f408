package client

// Transactional producing. A producer made WithTransactionalID gets its producer id from the
// transaction coordinator of its id (FindCoordinator key type 1, then InitProducerId, which fences
// any earlier producer with the id and aborts what it left open). Then, for each transaction:
//
//	BeginTransaction -> Produce... [-> SendOffsets / SendGroupOffsets] -> CommitTransaction (or AbortTransaction)
//
// The first record of a topic in a transaction adds every partition of the topic to it
// (AddPartitionsToTxn, one round trip, in Produce); batches carry the transactional attribute and
// the produce requests the transactional id. CommitTransaction flushes, refuses to commit when a
// record of the transaction failed (abort it then), and sends EndTxn. SendOffsets commits a
// consumer group's offsets inside the transaction (AddOffsetsToTxn to the transaction
// coordinator, TxnOffsetCommit to the group coordinator): they become visible only if it commits.
//
// Errors: PRODUCER_FENCED (and INVALID_PRODUCER_EPOCH from the coordinator or a partition) end the
// producer for good, as ErrProducerFenced; coordinator moves, CONCURRENT_TRANSACTIONS and network
// failures are retried until the call's context ends.
//
// Lock order: txnState.mu before nothing (it is held across coordinator round trips, which take
// no producer lock).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

type txnState struct {
	mu struct {
		sync.Mutex
		coordinator int32 // -1 when unknown
		open        bool
		topics      map[string]bool // topics added to the open transaction
		groups      map[string]bool // groups whose offsets it commits
		failed      error           // the first delivery failure in the open transaction
		fatal       error           // set once fenced
	}
}

func (t *txnState) noteFailure(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.open && t.mu.failed == nil {
		t.mu.failed = err
	}
	if t.mu.fatal == nil && (errors.Is(err, protocol.InvalidProducerEpoch) || errors.Is(err, protocol.ProducerFenced)) {
		t.mu.fatal = fmt.Errorf("%w: %w", ErrProducerFenced, err)
	}
}

// Transactional reports whether the producer was made WithTransactionalID.
func (p *Producer) Transactional() bool { return p.txn != nil }

func (p *Producer) initTransactions(ctx context.Context) error {
	p.txn = &txnState{}
	p.txn.mu.coordinator = -1
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &p.cfg.transactionalID
	req.TransactionTimeoutMillis = int32(p.cfg.transactionTimeout / time.Millisecond)
	req.ProducerID, req.ProducerEpoch = -1, -1
	raw, err := p.coordinatorRoundTripLocked(ctx, "init producer id", req, func(r kmsg.Response) int16 {
		return r.(*kmsg.InitProducerIDResponse).ErrorCode
	})
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.InitProducerIDResponse)
	p.producerID, p.producerEpoch = resp.ProducerID, resp.ProducerEpoch
	return nil
}

// BeginTransaction opens a transaction. It fails with ErrNoTransaction when one is open, and with
// ErrProducerFenced once fenced.
func (p *Producer) BeginTransaction() error {
	if p.txn == nil {
		return fmt.Errorf("%w: the producer is not transactional (WithTransactionalID)", ErrNoTransaction)
	}
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	if p.txn.mu.fatal != nil {
		return p.txn.mu.fatal
	}
	if p.txn.mu.open {
		return fmt.Errorf("%w: a transaction is already open", ErrNoTransaction)
	}
	p.txn.mu.open, p.txn.mu.failed = true, nil
	p.txn.mu.topics, p.txn.mu.groups = map[string]bool{}, map[string]bool{}
	return nil
}

// addToTransaction adds every partition of topic to the open transaction, once per transaction.
func (p *Producer) addToTransaction(ctx context.Context, topic *producerTopic) error {
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	switch {
	case p.txn.mu.fatal != nil:
		return p.txn.mu.fatal
	case !p.txn.mu.open:
		return fmt.Errorf("%w: produce outside a transaction (BeginTransaction first)", ErrNoTransaction)
	case p.txn.mu.topics[topic.name]:
		return nil
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(3)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.cfg.transactionalID, p.producerID, p.producerEpoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = topic.name
	for i := range topic.partitions {
		rt.Partitions = append(rt.Partitions, int32(i))
	}
	req.Topics = append(req.Topics, rt)
	_, err := p.coordinatorRoundTripLocked(ctx, "add partitions to transaction", req, func(r kmsg.Response) int16 {
		for _, t := range r.(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return p.ErrorCode
				}
			}
		}
		return 0
	})
	if err != nil {
		return err
	}
	p.txn.mu.topics[topic.name] = true
	return nil
}

// SendOffsets commits offsets (each the next offset to read) of group inside the open transaction,
// as the member member describes (GroupConsumer.Membership; a zero GroupMembership with
// Generation -1 commits without a member check).
func (p *Producer) SendOffsets(ctx context.Context, group string, member GroupMembership, offsets map[TopicPartition]int64) error {
	if p.txn == nil {
		return fmt.Errorf("%w: the producer is not transactional (WithTransactionalID)", ErrNoTransaction)
	}
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	switch {
	case p.txn.mu.fatal != nil:
		return p.txn.mu.fatal
	case !p.txn.mu.open:
		return fmt.Errorf("%w: offsets outside a transaction", ErrNoTransaction)
	}
	if !p.txn.mu.groups[group] {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = p.cfg.transactionalID, p.producerID, p.producerEpoch, group
		if _, err := p.coordinatorRoundTripLocked(ctx, "add offsets to transaction", req, func(r kmsg.Response) int16 {
			return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode
		}); err != nil {
			return err
		}
		p.txn.mu.groups[group] = true
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.SetVersion(3)
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = p.cfg.transactionalID, group, p.producerID, p.producerEpoch
	req.Generation, req.MemberID = member.Generation, member.MemberID
	if member.InstanceID != "" {
		req.InstanceID = &member.InstanceID
	}
	for _, byTopic := range groupByTopic(mapKeys(offsets)) {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = byTopic.topic
		for _, partition := range byTopic.partitions {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offsets[TopicPartition{byTopic.topic, partition}], -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	coordinator := newGroupCoordinator(p.client, group)
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		raw, err := coordinator.roundTrip(ctx, false, req)
		if err == nil {
			for _, t := range raw.(*kmsg.TxnOffsetCommitResponse).Topics {
				for _, tp := range t.Partitions {
					if err == nil {
						err = errorForCode("txn offset commit", t.Topic, tp.Partition, tp.ErrorCode, nil)
					}
				}
			}
		}
		if err == nil {
			return nil
		}
		if !isCoordinatorError(err) && !errors.Is(err, ErrNetwork) && !errors.Is(err, protocol.ConcurrentTransactions) {
			return p.fenceOn(fmt.Errorf("client: group %q: %w", group, err))
		}
		coordinator.forget()
		if err := sleepContext(ctx, backoff); err != nil {
			return err
		}
	}
}

// SendGroupOffsets is SendOffsets for a GroupConsumer's group, as its current member.
func (p *Producer) SendGroupOffsets(ctx context.Context, g *GroupConsumer, offsets map[TopicPartition]int64) error {
	return p.SendOffsets(ctx, g.group, g.Membership(), offsets)
}

// CommitTransaction flushes the transaction's records and commits it. When a record could not be
// delivered it commits nothing and returns that failure: abort the transaction then.
func (p *Producer) CommitTransaction(ctx context.Context) error { return p.endTransaction(ctx, true) }

// AbortTransaction flushes the transaction's records and aborts it: read_committed consumers
// never see them, and offsets sent with it are not committed.
func (p *Producer) AbortTransaction(ctx context.Context) error { return p.endTransaction(ctx, false) }

func (p *Producer) endTransaction(ctx context.Context, commit bool) error {
	if p.txn == nil {
		return fmt.Errorf("%w: the producer is not transactional (WithTransactionalID)", ErrNoTransaction)
	}
	flushErr := p.Flush(ctx)
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	switch {
	case p.txn.mu.fatal != nil:
		return p.txn.mu.fatal
	case !p.txn.mu.open:
		return fmt.Errorf("%w: nothing to end", ErrNoTransaction)
	case commit && flushErr != nil:
		return fmt.Errorf("client: commit: records not flushed: %w", flushErr)
	case commit && p.txn.mu.failed != nil:
		return fmt.Errorf("client: commit refused, a record of the transaction failed (abort it): %w", p.txn.mu.failed)
	}
	if len(p.txn.mu.topics) > 0 || len(p.txn.mu.groups) > 0 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.cfg.transactionalID, p.producerID, p.producerEpoch, commit
		if _, err := p.coordinatorRoundTripLocked(ctx, "end transaction", req, func(r kmsg.Response) int16 {
			return r.(*kmsg.EndTxnResponse).ErrorCode
		}); err != nil {
			return err
		}
	}
	p.txn.mu.open = false
	return nil
}

// fenceOn records err as fatal when it says the producer was fenced, and returns it.
func (p *Producer) fenceOn(err error) error {
	if errors.Is(err, protocol.ProducerFenced) || errors.Is(err, protocol.InvalidProducerEpoch) ||
		errors.Is(err, protocol.TransactionalIDAuthorizationFailed) {
		err = fmt.Errorf("%w: %w", ErrProducerFenced, err)
		p.txn.mu.fatal = err
	}
	return err
}

// coordinatorRoundTripLocked sends req to the transaction coordinator and returns the response
// when code reads 0 from it. Coordinator moves, CONCURRENT_TRANSACTIONS and network failures are
// retried with backoff until ctx ends. txn.mu is held.
func (p *Producer) coordinatorRoundTripLocked(ctx context.Context, op string, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, error) {
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		raw, err := p.coordinatorRequestLocked(ctx, req)
		if err == nil {
			if err = errorForCode(op, "", -1, code(raw), nil); err == nil {
				return raw, nil
			}
		}
		retriable := errors.Is(err, ErrNetwork) || isCoordinatorError(err) || errors.Is(err, protocol.ConcurrentTransactions)
		if !retriable {
			return nil, p.fenceOn(fmt.Errorf("client: transaction %q: %w", p.cfg.transactionalID, err))
		}
		if !errors.Is(err, protocol.ConcurrentTransactions) {
			p.txn.mu.coordinator = -1
		}
		if sleepErr := sleepContext(ctx, backoff); sleepErr != nil {
			return nil, fmt.Errorf("client: transaction %q: %w (last error: %w)", p.cfg.transactionalID, sleepErr, err)
		}
	}
}

// coordinatorRequestLocked finds the coordinator when unknown and sends req to it.
func (p *Producer) coordinatorRequestLocked(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if p.txn.mu.coordinator < 0 {
		conn, err := p.client.pool.anyConn(ctx, roleAdmin)
		if err != nil {
			return nil, err
		}
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorType = 1
		find.CoordinatorKey, find.CoordinatorKeys = p.cfg.transactionalID, []string{p.cfg.transactionalID}
		raw, err := conn.roundTrip(ctx, find)
		if err != nil {
			return nil, err
		}
		resp := raw.(*kmsg.FindCoordinatorResponse)
		code, message, nodeID, host, port := resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port
		for _, c := range resp.Coordinators {
			code, message, nodeID, host, port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		}
		if err := errorForCode("find transaction coordinator", "", -1, code, message); err != nil {
			return nil, err
		}
		p.client.pool.setAddresses(map[int32]string{nodeID: net.JoinHostPort(host, strconv.Itoa(int(port)))})
		p.txn.mu.coordinator = nodeID
	}
	conn, err := p.client.pool.conn(ctx, p.txn.mu.coordinator, roleAdmin)
	if err != nil {
		return nil, err
	}
	return conn.roundTrip(ctx, req)
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
