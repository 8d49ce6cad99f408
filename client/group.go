package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sluice-mq/sluice/protocol"
)

// GroupConsumer is a member of a consumer group (Kafka's classic group protocol): the group's
// coordinator spreads the subscribed topics' partitions over the members, and each member reads
// its partitions from the group's committed offsets.
//
// A background goroutine owned by the GroupConsumer joins the group (FindCoordinator, JoinGroup
// with the member-id-required rejoin, SyncGroup; the leader runs the balancer), heartbeats,
// applies each new assignment to the underlying Consumer (resolving start offsets with
// OffsetFetch and the reset policy) and runs the callbacks. A second goroutine commits
// periodically. Close stops both and waits for them.
//
// What is committed: by default the position of each partition, which Poll advances past every
// record it returns; with WithAutoCommitMarks, the offsets marked with MarkRecords. Revoked
// partitions are committed after the OnRevoked callback (WithCommitOnRevoke), and no record of a
// revoked partition is returned by Poll once its position has been read for that commit, so a
// clean rebalance hands the next owner exactly the records this member was not given.
//
// With WithGroupProtocol(GroupProtocolConsumer) the member speaks KIP-848 instead
// (group_kip848.go): ConsumerGroupHeartbeat in place of JoinGroup, SyncGroup and Heartbeat, the
// broker's assignor in place of the balancers, the member epoch in place of the generation.
// Everything else (positions, commits, callbacks, Poll) is shared.
type GroupConsumer struct {
	client      *Client
	consumer    *Consumer
	coordinator *groupCoordinator
	cfg         groupConfig
	group       string
	topics      []string // sorted

	mu struct {
		sync.Mutex
		identity memberIdentity
		protocol string // the protocol of the current generation; "" before the first
		leader   bool
		// owned is the current assignment. Invariant: every owned partition is either assigned
		// in the consumer or in starting; only the manager goroutine (and Close, after it
		// stopped) changes owned.
		owned map[TopicPartition]bool
		// starting holds owned partitions not yet read: resolving their start offset failed, or
		// Poll saw OFFSET_OUT_OF_RANGE (reset is then true).
		starting  map[TopicPartition]startKind
		marks     map[TopicPartition]int64 // MarkRecords: next offset to commit
		committed map[TopicPartition]int64 // what this member last committed
		fatal     error                    // the member stopped for good
		closed    bool
	}
	// commitMu orders commits: the offsets sent in one commit are read while it is held, so a
	// later commit never carries older offsets than an earlier one. Taken before mu; held across
	// the OffsetCommit round trip, never while a callback runs.
	commitMu sync.Mutex

	// leaderCounts are the partition counts behind the last assignment this member computed as
	// leader (nil otherwise); a leader rejoins when metadata shows other counts. Only the manager
	// goroutine touches it.
	leaderCounts map[string]int32

	wakeManager chan struct{} // capacity 1: Poll queued an offset reset
	// stopped ends when Close starts or the member fails; it interrupts Poll and the goroutines.
	stopped context.Context
	stop    context.CancelCauseFunc
	workers sync.WaitGroup
}

// startKind says how a partition in GroupConsumer.mu.starting starts.
type startKind uint8

const (
	startFromCommitted startKind = iota // the committed offset, else the reset policy
	startFromReset                      // the reset policy (the position was out of range)
)

// GroupMembership is a member's place in its group, as of the last JoinGroup.
type GroupMembership struct {
	MemberID   string // "" before the first JoinGroup answer
	InstanceID string // WithInstanceID; "" for a dynamic member
	Generation int32  // -1 before the first generation; GroupProtocolConsumer: the member epoch
	Protocol   string // the balancer the group chose; GroupProtocolConsumer: WithServerAssignor
	Leader     bool   // whether this member computed the assignment
}

// NewGroupConsumer joins group as a member subscribing to topics and returns at once; the join
// happens in the background, and Poll returns records once partitions are assigned. The
// GroupConsumer owns a Consumer on c (configured by WithGroupConsumerOptions); close it before c.
func NewGroupConsumer(c *Client, group string, topics []string, opts ...GroupOption) (*GroupConsumer, error) {
	cfg := defaultGroupConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	var errs []error
	if group == "" {
		errs = append(errs, errors.New("empty group id"))
	}
	if len(topics) == 0 {
		errs = append(errs, errors.New("no topics"))
	}
	if err := cfg.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("client: invalid group options: %w", err)
	}
	consumer, err := NewConsumer(c, cfg.consumerOptions...)
	if err != nil {
		return nil, err
	}
	g := &GroupConsumer{
		client:      c,
		consumer:    consumer,
		coordinator: newGroupCoordinator(c, group),
		cfg:         cfg,
		group:       group,
		topics:      slices.Compact(slices.Sorted(slices.Values(topics))),
		wakeManager: make(chan struct{}, 1),
	}
	g.mu.identity = memberIdentity{instanceID: cfg.instanceID, generation: -1}
	g.mu.owned = map[TopicPartition]bool{}
	g.mu.starting = map[TopicPartition]startKind{}
	g.mu.marks = map[TopicPartition]int64{}
	g.mu.committed = map[TopicPartition]int64{}
	g.stopped, g.stop = context.WithCancelCause(context.Background())
	for _, topic := range g.topics {
		c.metadata.use(topic)
	}
	g.workers.Add(1)
	go func() {
		defer g.workers.Done()
		if cfg.groupProtocol == GroupProtocolConsumer {
			g.manageConsumerProtocol(g.stopped)
		} else {
			g.manage(g.stopped)
		}
	}()
	if cfg.autoCommitInterval > 0 {
		g.workers.Add(1)
		go func() {
			defer g.workers.Done()
			g.autoCommit(g.stopped)
		}()
	}
	return g, nil
}

// Poll waits until records of assigned partitions were fetched (or ctx ends) and returns them,
// per partition in offset order, advancing the partitions' positions past them. A partition whose
// position is out of range is reset by the reset policy rather than reported. Poll fails with
// ErrClosed after Close, and with the member's error once it stopped for good (for example a
// static member fenced by another with its instance id: FENCED_INSTANCE_ID).
func (g *GroupConsumer) Poll(ctx context.Context) ([]Fetch, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(g.stopped, cancel)()
	for {
		if err := g.failure(); err != nil {
			return nil, err
		}
		fetches, err := g.consumer.Poll(ctx)
		if err != nil {
			if failure := g.failure(); failure != nil {
				return nil, failure
			}
			return nil, err
		}
		kept := fetches[:0]
		reset := false
		g.mu.Lock()
		for _, f := range fetches {
			tp := TopicPartition{f.Topic, f.Partition}
			if errors.Is(f.Err, protocol.OffsetOutOfRange) {
				if g.mu.owned[tp] {
					g.mu.starting[tp] = startFromReset
					reset = true
				}
				continue
			}
			kept = append(kept, f)
		}
		g.mu.Unlock()
		if reset {
			g.wake()
		}
		if len(kept) > 0 {
			return kept, nil
		}
	}
}

// failure is nil while the member runs, ErrClosed after Close, or the error that stopped it.
func (g *GroupConsumer) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.fatal != nil {
		return g.mu.fatal
	}
	if g.mu.closed {
		return ErrClosed
	}
	return nil
}

// Assigned lists the partitions the group assigned to this member, sorted.
func (g *GroupConsumer) Assigned() []TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.SortedFunc(maps.Keys(g.mu.owned), compareTopicPartitions)
}

// Membership returns the member's id, generation and role as of the last join.
func (g *GroupConsumer) Membership() GroupMembership {
	g.mu.Lock()
	defer g.mu.Unlock()
	return GroupMembership{
		MemberID: g.mu.identity.memberID, InstanceID: g.mu.identity.instanceID,
		Generation: g.mu.identity.generation, Protocol: g.mu.protocol, Leader: g.mu.leader,
	}
}

// MarkRecords marks records as processed: CommitMarked (and, with WithAutoCommitMarks, the
// automatic commits) commit the offset after the highest marked record of each partition.
// Records of partitions no longer assigned are ignored.
func (g *GroupConsumer) MarkRecords(records ...*Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range records {
		tp := TopicPartition{r.Topic, r.Partition}
		if g.mu.owned[tp] && r.Offset+1 > g.mu.marks[tp] {
			g.mu.marks[tp] = r.Offset + 1
		}
	}
}

// CommitMarked commits the marked offsets that were not committed yet.
func (g *GroupConsumer) CommitMarked(ctx context.Context) error {
	return g.commitSource(ctx, nil, true)
}

// CommitPolled commits, for every assigned partition, the position after the last record Poll
// returned.
func (g *GroupConsumer) CommitPolled(ctx context.Context) error {
	return g.commitSource(ctx, nil, false)
}

// CommitOffsets commits the given offsets (each the offset of the next record to read) as this
// member. It fails with ErrNotMember before the member has joined, and with a *KafkaError
// (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID...) when the group moved on.
func (g *GroupConsumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	return g.commitLocked(ctx, offsets)
}

// commitSource commits marks (marked) or positions of partitions (nil: every owned partition),
// skipping offsets already committed.
func (g *GroupConsumer) commitSource(ctx context.Context, partitions []TopicPartition, marked bool) error {
	g.commitMu.Lock()
	defer g.commitMu.Unlock()
	offsets := map[TopicPartition]int64{}
	g.mu.Lock()
	if partitions == nil {
		partitions = slices.Collect(maps.Keys(g.mu.owned))
	}
	for _, tp := range partitions {
		offset, ok := g.mu.marks[tp]
		if !marked {
			ok = false
			if _, starting := g.mu.starting[tp]; !starting {
				position, err := g.consumer.Position(tp) // Consumer.mu is a leaf
				offset, ok = position, err == nil
			}
		}
		if committed, known := g.mu.committed[tp]; ok && (!known || committed != offset) {
			offsets[tp] = offset
		}
	}
	g.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	return g.commitLocked(ctx, offsets)
}

// commitLocked sends one OffsetCommit as the current member; commitMu is held.
func (g *GroupConsumer) commitLocked(ctx context.Context, offsets map[TopicPartition]int64) error {
	g.mu.Lock()
	identity := g.mu.identity
	g.mu.Unlock()
	if identity.memberID == "" || identity.generation < 0 {
		return fmt.Errorf("%w: group %q", ErrNotMember, g.group)
	}
	if err := g.coordinator.commitOffsets(ctx, identity, offsets); err != nil {
		return fmt.Errorf("client: group %q: %w", g.group, err)
	}
	g.mu.Lock()
	for tp, offset := range offsets {
		if g.mu.owned[tp] {
			g.mu.committed[tp] = offset
		}
	}
	g.mu.Unlock()
	return nil
}

// CommittedOffsets asks the coordinator for the group's committed offsets of partitions (all
// assigned ones when none are named); -1 where the group has none.
func (g *GroupConsumer) CommittedOffsets(ctx context.Context, partitions ...TopicPartition) (map[TopicPartition]int64, error) {
	if len(partitions) == 0 {
		partitions = g.Assigned()
	}
	if len(partitions) == 0 {
		return map[TopicPartition]int64{}, nil
	}
	offsets, err := g.coordinator.fetchOffsets(ctx, partitions)
	if err != nil {
		return nil, fmt.Errorf("client: group %q: %w", g.group, err)
	}
	return offsets, nil
}

// Close leaves the group cleanly: it stops the background goroutines, revokes every partition
// (OnRevoked, then the commit on revoke), sends LeaveGroup (dynamic members only: a static member
// keeps its place until its session timeout, so that a restart does not rebalance the group; under
// GroupProtocolConsumer a ConsumerGroupHeartbeat at epoch -1, or -2 keeping a static member's
// place) and closes the Consumer. ctx bounds the commit and the leave; the error joins their failures.
func (g *GroupConsumer) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	g.mu.closed = true
	failed := g.mu.fatal != nil
	g.mu.Unlock()
	g.stop(ErrClosed)
	g.workers.Wait()
	// The manager may have left a JoinGroup or SyncGroup waiting on the membership connection;
	// its answer would hold up anything sent after it there.
	g.coordinator.close()

	var errs []error
	if !failed {
		if err := g.revoke(ctx, g.Assigned()); err != nil {
			errs = append(errs, err)
		}
		switch {
		case g.cfg.groupProtocol == GroupProtocolConsumer:
			errs = append(errs, g.leaveConsumerProtocol(ctx))
		case g.cfg.instanceID == "":
			errs = append(errs, g.leave(ctx))
		}
	}
	g.consumer.Close()
	return errors.Join(errs...)
}

func (g *GroupConsumer) wake() {
	select {
	case g.wakeManager <- struct{}{}:
	default:
	}
}
