package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// operation names a change method on the forwarding wire. Names are part of
// the protocol: never reuse or rename one.
type operation string

const (
	opRegisterBroker         operation = "register-broker"
	opCreateTopic            operation = "create-topic"
	opDeleteTopic            operation = "delete-topic"
	opCreatePartitions       operation = "create-partitions"
	opAlterTopicConfigs      operation = "alter-topic-configs"
	opCommitOffsets          operation = "commit-offsets"
	opDeleteGroupOffsets     operation = "delete-group-offsets"
	opDeletePartitionOffsets operation = "delete-partition-offsets"
	opAllocateProducerIDs    operation = "allocate-producer-ids"
	opJoin                   operation = "join"
	opReadIndex              operation = "read-index"
	opHeartbeat              operation = "heartbeat"
	opAlterPartition         operation = "alter-partition"
	opShutdownBroker         operation = "shutdown-broker"
	opElectPreferred         operation = "elect-preferred"
	opWriteGroupState        operation = "write-group-state"
	opAlterGroupConfigs      operation = "alter-group-configs"
	opWriteTransactions      operation = "write-transactions"
	opReportUnreachable      operation = "report-unreachable-leader"
	opCreateACLs             operation = "create-acls"
	opDeleteACLs             operation = "delete-acls"
	opAlterScramCredentials  operation = "alter-scram-credentials"
	opResignLeader           operation = "resign-leader"
)

// Retry pacing while the controller changes: the wait doubles from
// retryBackoffMin to retryBackoffMax, and ends early when a new controller
// is published.
const (
	retryBackoffMin = 10 * time.Millisecond
	retryBackoffMax = 200 * time.Millisecond
)

// serveOperation runs a forwarded call on this node, which must be the
// controller (every local method checks). It never forwards further.
func (c *Coordinator) serveOperation(ctx context.Context, op operation, args json.RawMessage) (any, error) {
	switch op {
	case opRegisterBroker:
		return serve(ctx, args, c.registerBroker)
	case opCreateTopic:
		return serve(ctx, args, c.createTopic)
	case opDeleteTopic:
		return serve(ctx, args, c.deleteTopic)
	case opCreatePartitions:
		return serve(ctx, args, c.createPartitions)
	case opAlterTopicConfigs:
		return serve(ctx, args, c.alterTopicConfigs)
	case opCommitOffsets:
		return serve(ctx, args, c.commitOffsetsOnController)
	case opDeleteGroupOffsets:
		return serve(ctx, args, c.deleteGroupOffsets)
	case opDeletePartitionOffsets:
		return serve(ctx, args, c.deletePartitionOffsets)
	case opAllocateProducerIDs:
		return serve(ctx, args, c.allocateProducerIDs)
	case opJoin:
		return serve(ctx, args, c.addNonVoter)
	case opReadIndex:
		return serve(ctx, args, c.readIndex)
	case opHeartbeat:
		return serve(ctx, args, c.heartbeat)
	case opReportUnreachable:
		return serve(ctx, args, c.unreachableLeaderReported)
	case opAlterPartition:
		return serve(ctx, args, c.alterPartition)
	case opShutdownBroker:
		return serve(ctx, args, c.shutdownBroker)
	case opElectPreferred:
		return serve(ctx, args, c.electPreferred)
	case opWriteGroupState:
		return serve(ctx, args, c.writeGroupState)
	case opAlterGroupConfigs:
		return serve(ctx, args, c.alterGroupConfigs)
	case opWriteTransactions:
		return serve(ctx, args, c.writeTransactions)
	case opCreateACLs:
		return serve(ctx, args, c.createACLs)
	case opDeleteACLs:
		return serve(ctx, args, c.deleteACLs)
	case opAlterScramCredentials:
		return serve(ctx, args, c.alterScramCredentials)
	case opResignLeader:
		return serve(ctx, args, c.resignLeader)
	default:
		return nil, fmt.Errorf("%w: unknown forwarded operation %q", errMalformedCommand, op)
	}
}

func serve[A, R any](ctx context.Context, raw json.RawMessage, method func(context.Context, A) (R, error)) (any, error) {
	var args A
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, fmt.Errorf("%w: forwarded arguments: %w", errMalformedCommand, err)
	}
	return method(ctx, args)
}

// callController runs a change on the controller: locally (method) when this
// node is the controller, otherwise forwarded as op with args to the node
// Raft names as leader, which runs the same method. While there is no
// controller, or it changes or cannot be reached (ErrNotLeader), the call is
// retried until ctx ends; without a deadline in ctx, Config.ApplyTimeout
// bounds it. A retried change may have been applied by the first attempt,
// as with any ErrNotLeader. After a forwarded call succeeds, this node has
// applied the change too (its Metadata and Offsets show it).
func callController[A, R any](c *Coordinator, ctx context.Context, op operation, args A,
	method func(context.Context, A) (R, error)) (R, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	var zero R
	backoff := retryBackoffMin
	var lastErr error
	for {
		if c.isClosed() {
			return zero, fmt.Errorf("%w: %s", ErrClosed, op)
		}
		controller := c.Metadata().ControllerID
		if c.IsLeader() {
			result, err := method(ctx, args)
			if !retriable(err) {
				return result, err
			}
			lastErr = err
		} else if address, id := c.raft.LeaderWithID(); address == "" || id == raftServerID(c.config.NodeID) {
			lastErr = fmt.Errorf("%w: no controller is known", ErrNotLeader)
		} else {
			var result R
			index, err := c.forwardUntilDeposed(ctx, string(address), nodeIDOf(id), controller, op, args, &result)
			if err == nil {
				return result, c.waitApplied(ctx, index)
			}
			if !retriable(err) {
				return zero, err
			}
			lastErr = err
		}
		if !c.pauseForController(ctx, backoff, controller) {
			if c.isClosed() {
				return zero, fmt.Errorf("%w: %s", ErrClosed, op)
			}
			return zero, fmt.Errorf("%w: %s: %w", ErrTimeout, op, lastErr)
		}
		backoff = min(2*backoff, retryBackoffMax)
	}
}

// errControllerChanged cancels a forwarded call whose controller was succeeded.
var errControllerChanged = fmt.Errorf("%w: another controller took over during the call", ErrNotLeader)

// forwardUntilDeposed is forwardTo target (at address), abandoned with a retriable error once a
// controller other than target and published (the controller published when the call began) is
// published: a controller that is paused or cut off would otherwise hold the call until its
// deadline, long after another took over (a leader's ISR change waited so for a paused
// controller, with the partition below min.insync.replicas).
func (c *Coordinator) forwardUntilDeposed(ctx context.Context, address string, target, published int32, op operation, args any, result any) (uint64, error) {
	forwardCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		err := c.view.waitFor(forwardCtx, c.stop, func(m *Metadata) bool {
			return m.ControllerID >= 0 && m.ControllerID != target && m.ControllerID != published
		})
		if err == nil {
			cancel(errControllerChanged)
		}
	}()
	index, err := c.forwardTo(forwardCtx, address, op, args, result)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(forwardCtx), errControllerChanged) {
		return 0, errControllerChanged
	}
	return index, err
}

// forwardTo makes one forwarded call to address and decodes its result into
// result (unless nil). It returns the controller's applied index.
func (c *Coordinator) forwardTo(ctx context.Context, address string, op operation, args any, result any) (uint64, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	encoded, err := json.Marshal(args)
	if err != nil {
		return 0, fmt.Errorf("coordinator: encode %s arguments: %w", op, err)
	}
	request := &forwardRequest{Operation: op, Args: encoded}
	if deadline, ok := ctx.Deadline(); ok {
		request.TimeoutMillis = max(1, time.Until(deadline).Milliseconds())
	}
	response, err := c.forwarder.roundTrip(ctx, address, request)
	if err != nil {
		return 0, err
	}
	if response.Error != nil {
		return 0, response.Error.decode()
	}
	if result != nil && len(response.Result) > 0 {
		if err := json.Unmarshal(response.Result, result); err != nil {
			return 0, fmt.Errorf("coordinator: decode %s result from %s: %w", op, address, err)
		}
	}
	return response.Index, nil
}

// callContext bounds ctx by Config.ApplyTimeout when it has no deadline and
// cancels it when the Coordinator closes.
func (c *Coordinator) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var cancelTimeout context.CancelFunc = func() {}
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancelTimeout = context.WithTimeout(ctx, c.config.ApplyTimeout)
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.closing, cancel)
	return ctx, func() {
		stop()
		cancel()
		cancelTimeout()
	}
}

// retriable reports whether a call may succeed if tried again once the
// controller settles.
func retriable(err error) bool {
	return err != nil && errors.Is(err, ErrNotLeader)
}

// pauseForController waits up to backoff, less if a controller other than
// previous is published. It reports false when ctx ended or the Coordinator
// closed.
func (c *Coordinator) pauseForController(ctx context.Context, backoff time.Duration, previous int32) bool {
	wait, cancel := context.WithTimeout(ctx, backoff)
	defer cancel()
	c.view.waitFor(wait, c.stop, func(m *Metadata) bool {
		return m.ControllerID >= 0 && m.ControllerID != previous
	})
	return ctx.Err() == nil && !c.isClosed()
}

// pause waits for backoff; it reports false when ctx ended or the
// Coordinator closed.
func (c *Coordinator) pause(ctx context.Context, backoff time.Duration) bool {
	timer := time.NewTimer(backoff)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	case <-c.stop:
		return false
	}
}

func (c *Coordinator) isClosed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// waitApplied waits until this node's state machine has applied index.
func (c *Coordinator) waitApplied(ctx context.Context, index uint64) error {
	if err := c.fsm.waitApplied(ctx, c.stop, index); err != nil {
		if errors.Is(err, ErrClosed) {
			return err
		}
		return &applyBehindError{controller: index, local: c.fsm.appliedIndex(), cause: err}
	}
	return nil
}

// applyBehindError: a forwarded change succeeded on the controller, but this node did not apply
// the controller's index in time. It is an ErrTimeout.
type applyBehindError struct {
	controller, local uint64
	cause             error
}

func (e *applyBehindError) Error() string {
	return fmt.Sprintf("%v: the change applied on the controller at index %d, this node has applied %d: %v",
		ErrTimeout, e.controller, e.local, e.cause)
}

func (e *applyBehindError) Unwrap() []error { return []error{ErrTimeout, e.cause} }

// readIndexResult is the controller's applied index and cluster id.
type readIndexResult struct {
	ClusterID string `json:"clusterID"`
}

// readIndex serves catchUp and read barriers (read_barrier.go): the forwarding response carries
// the index. The controller first confirms with a quorum that it still leads, so that a stale
// leader (paused, or cut off) never answers an index older than what a newer leader committed.
func (c *Coordinator) readIndex(ctx context.Context, _ struct{}) (readIndexResult, error) {
	if err := c.checkLeader(ctx); err != nil {
		return readIndexResult{}, err
	}
	if err := c.verifyLeadership(ctx); err != nil {
		return readIndexResult{}, err
	}
	return readIndexResult{ClusterID: c.Metadata().ClusterID}, nil
}

// catchUp makes a node that is not the controller apply everything the
// controller had applied when asked, and checks that both belong to the
// same cluster.
func (c *Coordinator) catchUp(ctx context.Context) error {
	result, err := callController(c, ctx, opReadIndex, struct{}{}, c.readIndex)
	if err != nil {
		return fmt.Errorf("coordinator: catch up with the controller: %w", err)
	}
	if local := c.Metadata().ClusterID; result.ClusterID != local {
		return fmt.Errorf("%w: this node's state names cluster %s, the controller's %s", ErrClusterMismatch, local, result.ClusterID)
	}
	return nil
}
