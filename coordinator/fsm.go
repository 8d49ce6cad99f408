package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// fsm is the Raft state machine. hashicorp/raft calls Apply, Snapshot and
// Restore from one goroutine (Restore also from NewRaft before that
// goroutine starts); FSMSnapshot.Persist runs concurrently with Apply, which
// is safe because states are immutable.
type fsm struct {
	// state is the replicated metadata as of the last applied entry. It is
	// written only by the Raft FSM goroutine and read by anyone.
	// Invariant: state.ControllerID == -1 (the controller is not replicated
	// state; the view adds it).
	state atomic.Pointer[Metadata]
	// offsets is the consumer offsets as of the last applied offsets entry; written only by the
	// Raft FSM goroutine, read by anyone.
	offsets atomic.Pointer[Offsets]
	// nextProducerID is the first producer id not yet reserved (producer_ids.go); written only by
	// the Raft FSM goroutine, read by anyone. Invariant: it never decreases.
	nextProducerID atomic.Int64
	// groupState is the KIP-848 and share groups' durable state (group_state.go); written only by
	// the Raft FSM goroutine, read by anyone.
	groupState atomic.Pointer[GroupState]
	// transactions is the transaction coordinator's state (transactions.go); written only by the
	// Raft FSM goroutine, read by anyone.
	transactions atomic.Pointer[Transactions]
	// security is the ACLs and SCRAM credentials (security.go); written only by the Raft FSM
	// goroutine, read by anyone.
	security atomic.Pointer[Security]
	// applied is the Raft index of the last entry applied (or of the
	// snapshot restored); written only by the Raft FSM goroutine.
	// Invariant: it never decreases on a running node except through
	// Restore.
	applied atomic.Uint64
	// appliedChanged is closed when applied grows, if someone waits.
	appliedChanged struct {
		sync.Mutex
		ch chan struct{} // nil while no one waits
	}
	// publish hands every new state to the view. It must not block.
	publish func(*Metadata)
	logger  *slog.Logger
}

func (f *fsm) appliedIndex() uint64 { return f.applied.Load() }

func (f *fsm) setApplied(index uint64) {
	f.applied.Store(index)
	f.appliedChanged.Lock()
	if f.appliedChanged.ch != nil {
		close(f.appliedChanged.ch)
		f.appliedChanged.ch = nil
	}
	f.appliedChanged.Unlock()
}

// waitApplied blocks until applied >= index, ctx ends or stop closes
// (ErrClosed).
func (f *fsm) waitApplied(ctx context.Context, stop <-chan struct{}, index uint64) error {
	for {
		f.appliedChanged.Lock()
		if f.applied.Load() >= index {
			f.appliedChanged.Unlock()
			return nil
		}
		if f.appliedChanged.ch == nil {
			f.appliedChanged.ch = make(chan struct{})
		}
		changed := f.appliedChanged.ch
		f.appliedChanged.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrClosed
		}
	}
}

func newFSM(publish func(*Metadata), logger *slog.Logger) *fsm {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &fsm{publish: publish, logger: logger}
	f.state.Store(emptyMetadata())
	f.offsets.Store(emptyOffsets())
	f.groupState.Store(emptyGroupState())
	f.transactions.Store(emptyTransactions())
	f.security.Store(emptySecurity())
	return f
}

// Apply applies one committed command entry and returns an applyResult to
// the proposer's future.
func (f *fsm) Apply(entry *raft.Log) any {
	defer f.setApplied(entry.Index)
	c, err := decodeCommand(entry.Data)
	if errors.Is(err, errUnknownCommand) {
		// Invariant: every node understands every committed command. A
		// newer version wrote this entry; skipping it would diverge.
		panic(fmt.Sprintf("coordinator: raft log index %d holds a command this version cannot apply (%v); upgrade this node", entry.Index, err))
	}
	if err != nil {
		f.logger.Error("coordinator: rejected malformed raft entry", "index", entry.Index, "error", err)
		return applyResult{err: err}
	}
	if pc, ok := c.(producerIDsCommand); ok {
		next, result := pc.applyProducerIDs(f.nextProducerID.Load())
		f.nextProducerID.Store(next)
		return result
	}
	if sc, ok := c.(securityCommand); ok {
		next, result := sc.applySecurity(f.security.Load())
		if next != nil {
			next.Index = entry.Index
			f.security.Store(next)
		}
		return result
	}
	if tc, ok := c.(*writeTransactionsCommand); ok {
		transactions, offsets, result := tc.applyTransactions(f.transactions.Load(), f.offsets.Load(), entry.Index)
		if transactions != nil {
			f.transactions.Store(transactions)
		}
		if offsets != nil {
			f.offsets.Store(offsets)
		}
		return result
	}
	if gc, ok := c.(groupStateCommand); ok {
		next, result := gc.applyGroupState(f.groupState.Load())
		if next != nil {
			next.Index = entry.Index
			f.groupState.Store(next)
		}
		return result
	}
	if oc, ok := c.(offsetsCommand); ok {
		next, result := oc.applyOffsets(f.offsets.Load(), f.state.Load())
		if next != nil {
			next.Index = entry.Index
			f.offsets.Store(next)
		}
		return result
	}
	next, result := c.apply(f.state.Load())
	if next != nil {
		if deleted, ok := c.(*deleteTopicAndOffsetsCommand); ok {
			if offsets, changed := f.offsets.Load().withoutTopic(deleted.Name); changed {
				offsets.Index = entry.Index
				f.offsets.Store(offsets)
			}
		}
		next.Version = entry.Index
		if !slices.Equal(next.LiveBrokerIDs(), f.state.Load().LiveBrokerIDs()) {
			next.LiveSince = entry.Index
		}
		f.state.Store(next)
		f.publish(next)
	}
	return result
}

// snapshotFormat is the version of the snapshot layout below. Format 2 added Offsets and
// OffsetsIndex, format 3 NextProducerID, format 4 GroupState, format 5 AppliedIndex and the
// brokers' Fenced and the partitions' PartitionEpoch fields (which older versions would silently
// drop), format 6 Transactions, format 7 Security, format 8 LiveSince; formats 1 (no offsets), 2
// (no producer ids: none had been reserved), 3, 4, 5 (no transactions), 6 (no ACLs or
// credentials) and 7 (LiveSince unknown: 0) are still read.
const snapshotFormat = 8

// snapshotFile is the JSON document a snapshot holds. Brokers and topics are
// sorted so equal states produce equal bytes.
type snapshotFile struct {
	Format    int      `json:"format"`
	Version   uint64   `json:"version"`
	LiveSince uint64   `json:"liveSince,omitempty"` // Metadata.LiveSince (format 8)
	ClusterID string   `json:"clusterID"`
	Brokers   []Broker `json:"brokers"`
	Topics    []*Topic `json:"topics"`
	// OffsetsIndex and Offsets hold the consumer offsets (Offsets.Index and every commit, sorted).
	OffsetsIndex uint64         `json:"offsetsIndex,omitempty"`
	Offsets      []OffsetCommit `json:"offsets,omitempty"`
	// NextProducerID is the first producer id not yet reserved.
	NextProducerID int64 `json:"nextProducerID,omitempty"`
	// GroupState holds KIP-848 and share groups' durable state.
	GroupState *groupStateFile `json:"groupState,omitempty"`
	// AppliedIndex is the Raft index of the last entry the snapshot includes. Older formats lack
	// it; Restore then takes the larger of Version and OffsetsIndex.
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	// Transactions holds the transaction coordinator's state (format 6).
	Transactions *transactionsFile `json:"transactions,omitempty"`
	// Security holds the ACLs and SCRAM credentials (format 7).
	Security *securityFile `json:"security,omitempty"`
}

// Snapshot captures the current state. States are immutable, so capturing
// is taking the pointer.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{state: f.state.Load(), offsets: f.offsets.Load(), nextProducerID: f.nextProducerID.Load(),
		groupState: f.groupState.Load(), applied: f.applied.Load(), transactions: f.transactions.Load(),
		security: f.security.Load()}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(snapshot io.ReadCloser) error {
	defer snapshot.Close()
	var file snapshotFile
	if err := json.NewDecoder(snapshot).Decode(&file); err != nil {
		return fmt.Errorf("coordinator: decode snapshot: %w", err)
	}
	if file.Format < 1 || file.Format > snapshotFormat {
		return fmt.Errorf("coordinator: snapshot format %d, this version reads 1 to %d", file.Format, snapshotFormat)
	}
	if file.NextProducerID < 0 {
		return fmt.Errorf("coordinator: snapshot holds next producer id %d", file.NextProducerID)
	}
	state := emptyMetadata()
	state.Version = file.Version
	state.LiveSince = file.LiveSince
	state.ClusterID = file.ClusterID
	for _, broker := range file.Brokers {
		state.Brokers[broker.NodeID] = broker
	}
	for _, topic := range file.Topics {
		if topic == nil || topic.Name == "" {
			return fmt.Errorf("coordinator: snapshot holds a topic without a name")
		}
		state.Topics[topic.Name] = topic
	}
	offsets := emptyOffsets().withCommits(file.Offsets)
	offsets.Index = file.OffsetsIndex
	groupState := emptyGroupState()
	if file.GroupState != nil {
		groupState = file.GroupState.state()
	}
	transactions := emptyTransactions()
	if file.Transactions != nil {
		transactions = file.Transactions.state()
	}
	security := emptySecurity()
	if file.Security != nil {
		security = file.Security.state()
	}
	f.security.Store(security)
	f.transactions.Store(transactions)
	f.groupState.Store(groupState)
	f.state.Store(state)
	f.offsets.Store(offsets)
	f.nextProducerID.Store(file.NextProducerID)
	f.publish(state)
	f.setApplied(max(file.AppliedIndex, file.Version, file.OffsetsIndex, transactions.Index, security.Index))
	return nil
}

type fsmSnapshot struct {
	state          *Metadata
	offsets        *Offsets
	nextProducerID int64
	groupState     *GroupState
	applied        uint64
	transactions   *Transactions
	security       *Security
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	file := snapshotFile{
		Format:       snapshotFormat,
		Version:      s.state.Version,
		LiveSince:    s.state.LiveSince,
		ClusterID:    s.state.ClusterID,
		Brokers:      make([]Broker, 0, len(s.state.Brokers)),
		Topics:       make([]*Topic, 0, len(s.state.Topics)),
		OffsetsIndex: s.offsets.Index,
		Offsets:      s.offsets.sortedCommits(),

		NextProducerID: s.nextProducerID,
		AppliedIndex:   s.applied,
	}
	if s.transactions.Index > 0 {
		transactions := s.transactions.file()
		file.Transactions = &transactions
	}
	if s.security.Index > 0 {
		security := s.security.file()
		file.Security = &security
	}
	if s.groupState.Index > 0 {
		groupState := s.groupState.file()
		file.GroupState = &groupState
	}
	for _, id := range s.state.BrokerIDs() {
		file.Brokers = append(file.Brokers, s.state.Brokers[id])
	}
	for _, name := range s.state.TopicNames() {
		file.Topics = append(file.Topics, s.state.Topics[name])
	}
	if err := json.NewEncoder(sink).Encode(&file); err != nil {
		return errors.Join(fmt.Errorf("coordinator: write snapshot: %w", err), sink.Cancel())
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("coordinator: close snapshot: %w", err)
	}
	return nil
}

func (s *fsmSnapshot) Release() {}
