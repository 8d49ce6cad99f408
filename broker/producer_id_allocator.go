package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

// producerIDBlockSize is how many producer ids the broker reserves through Raft at a time: one Raft
// round per thousand idempotent producers. Ids of the current block are lost when the broker stops.
const producerIDBlockSize = 1000

// producerIDAllocator hands out producer ids from a block reserved through the coordinator, and
// reserves the next block when the current one runs out.
type producerIDAllocator struct {
	coordinator *coordinator.Coordinator
	nodeID      int32
	blockSize   int64

	// mu is held while a new block is reserved (one Raft round), so concurrent callers wait for that
	// block rather than each reserving one.
	mu struct {
		sync.Mutex
		// Invariant: next <= end; ids in [next, end) are reserved for this broker and not handed out.
		next, end int64
	}
}

func newProducerIDAllocator(c *coordinator.Coordinator, nodeID int32, blockSize int64) *producerIDAllocator {
	return &producerIDAllocator{coordinator: c, nodeID: nodeID, blockSize: blockSize}
}

// allocate returns a producer id no one was given before. Errors wrap a Kafka error code:
// COORDINATOR_LOAD_IN_PROGRESS (retriable) when no block can be reserved now, as Kafka answers when
// its producer id manager has no block ready.
func (a *producerIDAllocator) allocate(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.next >= a.mu.end {
		block, err := a.coordinator.AllocateProducerIDs(ctx, a.nodeID, a.blockSize)
		if err != nil {
			code := protocol.CoordinatorLoadInProgress
			if errors.Is(err, coordinator.ErrProducerIDsExhausted) {
				code = protocol.UnknownServerError
			}
			return -1, fmt.Errorf("broker: reserve producer ids: %w: %w", code, err)
		}
		a.mu.next, a.mu.end = block.First, block.End()
	}
	id := a.mu.next
	a.mu.next++
	return id, nil
}

// issuedBelow is the bound under which every producer id ever handed out in the cluster lies.
func (a *producerIDAllocator) issuedBelow() int64 { return a.coordinator.NextProducerID() }
