package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Producer ids identify idempotent producers (Kafka's InitProducerId). They must never be handed
// out twice, across broker restarts and across brokers, so the cluster reserves them through Raft in
// blocks: a broker proposes allocate-producer-ids for a block, hands ids out of it from memory, and
// asks for the next block when it runs out. Ids of a block that a broker did not hand out before it
// stopped are skipped, never reused. Like consumer offsets, the next free id is replicated state
// kept apart from Metadata: reserving a block bumps neither Metadata.Version nor wakes subscribers.

// MaxProducerIDBlock is the largest block one allocate-producer-ids entry reserves.
const MaxProducerIDBlock = 1 << 20

// ErrProducerIDsExhausted: no producer id is left below the largest int64. Brokers answer
// UNKNOWN_SERVER_ERROR; at a million ids a second it takes 290,000 years to get here.
var ErrProducerIDsExhausted = errors.New("coordinator: producer ids exhausted")

// ProducerIDBlock is a range of producer ids reserved for one broker: First, First+1, ...,
// First+Count-1.
type ProducerIDBlock struct {
	First int64 `json:"first"`
	Count int64 `json:"count"`
}

// End is the id after the block.
func (b ProducerIDBlock) End() int64 { return b.First + b.Count }

// NextProducerID is the first producer id no block has reserved yet. Every id a broker hands out
// is below it.
func (c *Coordinator) NextProducerID() int64 { return c.fsm.nextProducerID.Load() }

// AllocateProducerIDs reserves count (1..MaxProducerIDBlock) consecutive producer ids for broker
// through Raft. The controller allocates; other nodes forward the call.
func (c *Coordinator) AllocateProducerIDs(ctx context.Context, broker int32, count int64) (ProducerIDBlock, error) {
	return callController(c, ctx, opAllocateProducerIDs, allocateProducerIDsCommand{Broker: broker, Count: count},
		c.allocateProducerIDs)
}

func (c *Coordinator) allocateProducerIDs(ctx context.Context, args allocateProducerIDsCommand) (ProducerIDBlock, error) {
	if args.Count < 1 || args.Count > MaxProducerIDBlock {
		return ProducerIDBlock{}, fmt.Errorf("%w: producer id block of %d, want 1..%d", errMalformedCommand, args.Count, MaxProducerIDBlock)
	}
	if err := c.checkLeader(ctx); err != nil {
		return ProducerIDBlock{}, err
	}
	result, err := c.propose(ctx, &args)
	if err != nil {
		return ProducerIDBlock{}, err
	}
	return result.producerIDs, nil
}

// producerIDsCommand is a command that changes the next free producer id rather than Metadata.
// The FSM applies it with applyProducerIDs; its apply (from command) is never called.
type producerIDsCommand interface {
	command
	applyProducerIDs(next int64) (updated int64, result applyResult)
}

// allocateProducerIDsCommand reserves the next Count producer ids. Broker names who asked (for
// logs and later for multi-broker bookkeeping); application does not depend on it.
type allocateProducerIDsCommand struct {
	Broker int32 `json:"broker"`
	Count  int64 `json:"count"`
}

func (*allocateProducerIDsCommand) kind() commandType { return commandAllocateProducerIDs }

func (*allocateProducerIDsCommand) apply(*Metadata) (*Metadata, applyResult) {
	return nil, applyResult{}
}

func (c *allocateProducerIDsCommand) applyProducerIDs(next int64) (int64, applyResult) {
	if c.Count < 1 || c.Count > MaxProducerIDBlock {
		return next, applyResult{err: fmt.Errorf("%w: allocate-producer-ids of %d", errMalformedCommand, c.Count)}
	}
	if next > math.MaxInt64-c.Count {
		return next, applyResult{err: fmt.Errorf("%w: next free id %d", ErrProducerIDsExhausted, next)}
	}
	block := ProducerIDBlock{First: next, Count: c.Count}
	return block.End(), applyResult{producerIDs: block}
}
