package coordinator

// Transaction state (Kafka's transaction log, __transaction_state) lives here, in the Raft log, like
// committed offsets: a transaction coordinator that dies loses nothing, and whichever broker
// coordinates a transactional id next reads its state from its own replica of the FSM and completes
// what was decided (PrepareCommit, PrepareAbort). Raft was chosen over a replicated internal log
// because the state is small (one record per transactional id, written a few times per
// transaction), every broker already has the FSM, and writes need compare-and-set (see
// TransactionUpdate.BasedOn), which a log append does not give. Only transaction metadata goes
// through Raft, never produced records, and callers batch the writes of concurrent transactions
// into one entry (broker/txn_batcher.go).
//
// Offsets committed inside a transaction (TxnOffsetCommit) are staged here by producer id. The
// entry that moves the transaction to PrepareCommit also moves its staged offsets into the
// consumer offsets, in the same FSM step: the commit decision and the offsets' visibility are
// one atomic change. Any other end of the transaction drops them.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-mq/sluice/txn"
)

// TransactionRecord is one transactional id's stored state.
type TransactionRecord struct {
	txn.Metadata
	// Version is the Raft index of the entry that last wrote the record.
	Version uint64 `json:"version"`
}

// Transactions is an immutable snapshot of every transactional id's state.
type Transactions struct {
	// Index is the Raft index of the last applied transactions change (0 before any).
	Index uint64
	byID  map[string]TransactionRecord
	// staged are offsets committed inside Ongoing transactions, by producer id.
	staged map[int64][]OffsetCommit
}

func emptyTransactions() *Transactions {
	return &Transactions{byID: map[string]TransactionRecord{}, staged: map[int64][]OffsetCommit{}}
}

// Lookup returns a transactional id's record.
func (t *Transactions) Lookup(transactionalID string) (TransactionRecord, bool) {
	r, ok := t.byID[transactionalID]
	return r, ok
}

// IDs lists every transactional id, sorted.
func (t *Transactions) IDs() []string { return slices.Sorted(maps.Keys(t.byID)) }

// Len is the number of transactional ids.
func (t *Transactions) Len() int { return len(t.byID) }

// Staged returns the offsets a producer committed in its open transaction. Must not be modified.
func (t *Transactions) Staged(producerID int64) []OffsetCommit { return t.staged[producerID] }

// HasStaged reports whether an open transaction holds an offset commit for the group's partition
// (OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT then).
func (t *Transactions) HasStaged(group string, tp TopicPartition) bool {
	for _, commits := range t.staged {
		for _, c := range commits {
			if c.Group == group && c.TopicPartition == tp {
				return true
			}
		}
	}
	return false
}

// TransactionWrite is one batch of transaction changes, applied as one Raft entry.
type TransactionWrite struct {
	Updates []TransactionUpdate `json:"updates,omitempty"`
	Stage   []StagedOffsets     `json:"stage,omitempty"`
}

// Empty reports a write with nothing in it.
func (w TransactionWrite) Empty() bool { return len(w.Updates) == 0 && len(w.Stage) == 0 }

// TransactionUpdate stores a record if the stored one is still the one the writer read.
type TransactionUpdate struct {
	Metadata txn.Metadata `json:"metadata"`
	// BasedOn is the Version of the record the writer read, 0 for an id it found unstored.
	BasedOn uint64 `json:"basedOn"`
}

// StagedOffsets are offsets committed inside a transaction (TxnOffsetCommit). They are refused
// unless the transactional id is Ongoing at that producer id and epoch and added every group.
type StagedOffsets struct {
	TransactionalID string         `json:"transactionalID"`
	ProducerID      int64          `json:"producerID"`
	ProducerEpoch   int16          `json:"producerEpoch"`
	Commits         []OffsetCommit `json:"commits"`
}

// TransactionWriteResult says which parts of a write did not apply.
type TransactionWriteResult struct {
	// Conflicts are the ids whose record changed since the writer read it: not written.
	Conflicts []string `json:"conflicts,omitempty"`
	// Refused are the indexes of Stage entries that did not apply.
	Refused []int `json:"refused,omitempty"`
}

// Transactions returns the latest transactions snapshot: one atomic load; the result must not be
// modified. A change is visible here before WriteTransactions returns.
func (c *Coordinator) Transactions() *Transactions { return c.fsm.transactions.Load() }

// WriteTransactions applies a batch of transaction changes as one Raft entry and returns once it
// applied on this node too, or with an error wrapping ErrNotLeader, ErrTimeout or ErrClosed (the
// write may then still apply). Any node may call it; others forward to the controller.
func (c *Coordinator) WriteTransactions(ctx context.Context, write TransactionWrite) (TransactionWriteResult, error) {
	if write.Empty() {
		return TransactionWriteResult{}, nil
	}
	return callController(c, ctx, opWriteTransactions, write, c.writeTransactions)
}

func (c *Coordinator) writeTransactions(ctx context.Context, write TransactionWrite) (TransactionWriteResult, error) {
	if err := write.validate(); err != nil {
		return TransactionWriteResult{}, err
	}
	if err := c.checkLeader(ctx); err != nil {
		return TransactionWriteResult{}, err
	}
	result, err := c.propose(ctx, &writeTransactionsCommand{TransactionWrite: write})
	if err != nil {
		return TransactionWriteResult{}, err
	}
	return result.transactions, nil
}

func (w TransactionWrite) validate() error {
	for _, u := range w.Updates {
		if u.Metadata.TransactionalID == "" || u.Metadata.ProducerID < 0 {
			return fmt.Errorf("%w: write-transactions with id %q producer %d", errMalformedCommand, u.Metadata.TransactionalID, u.Metadata.ProducerID)
		}
	}
	for _, s := range w.Stage {
		for _, commit := range s.Commits {
			if commit.Group == "" || commit.Topic == "" || commit.Partition < 0 {
				return fmt.Errorf("%w: staged offset of group %q topic %q partition %d", errMalformedCommand, commit.Group, commit.Topic, commit.Partition)
			}
		}
	}
	return nil
}

// writeTransactionsCommand applies a TransactionWrite. The FSM applies it with applyTransactions;
// its apply (from command) is never called.
type writeTransactionsCommand struct {
	TransactionWrite
}

func (*writeTransactionsCommand) kind() commandType { return commandWriteTransactions }

func (*writeTransactionsCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

// applyTransactions returns the next transactions and offsets (offsets nil when unchanged).
func (c *writeTransactionsCommand) applyTransactions(state *Transactions, offsets *Offsets, index uint64) (*Transactions, *Offsets, applyResult) {
	if err := c.validate(); err != nil {
		return nil, nil, applyResult{err: err}
	}
	next := &Transactions{Index: index, byID: maps.Clone(state.byID), staged: maps.Clone(state.staged)}
	var result TransactionWriteResult
	var nextOffsets *Offsets
	for _, u := range c.Updates {
		m := u.Metadata
		current, found := next.byID[m.TransactionalID]
		if (found && current.Version != u.BasedOn) || (!found && u.BasedOn != 0) {
			result.Conflicts = append(result.Conflicts, m.TransactionalID)
			continue
		}
		if found && current.ProducerID != m.ProducerID {
			delete(next.staged, current.ProducerID)
		}
		switch {
		case m.State == txn.PrepareCommit && (!found || current.State != txn.PrepareCommit):
			if commits := next.staged[m.ProducerID]; len(commits) > 0 {
				base := offsets
				if nextOffsets != nil {
					base = nextOffsets
				}
				nextOffsets = base.withCommits(commits)
				nextOffsets.Index = index
			}
			delete(next.staged, m.ProducerID)
		case m.State != txn.Ongoing:
			delete(next.staged, m.ProducerID)
		}
		next.byID[m.TransactionalID] = TransactionRecord{Metadata: m, Version: index}
	}
	for i, s := range c.Stage {
		record, found := next.byID[s.TransactionalID]
		ok := found && record.ProducerID == s.ProducerID && record.ProducerEpoch == s.ProducerEpoch && record.State == txn.Ongoing
		for _, commit := range s.Commits {
			ok = ok && record.HasGroup(commit.Group)
		}
		if !ok {
			result.Refused = append(result.Refused, i)
			continue
		}
		next.staged[s.ProducerID] = mergeStaged(next.staged[s.ProducerID], s.Commits)
	}
	return next, nextOffsets, applyResult{transactions: result}
}

// mergeStaged returns have with commits added; a later commit of a group's partition replaces the
// earlier one. have is not modified.
func mergeStaged(have, commits []OffsetCommit) []OffsetCommit {
	out := slices.Clone(have)
	for _, c := range commits {
		i := slices.IndexFunc(out, func(o OffsetCommit) bool { return o.Group == c.Group && o.TopicPartition == c.TopicPartition })
		if i >= 0 {
			out[i] = c
		} else {
			out = append(out, c)
		}
	}
	return out
}

// transactionsFile is the snapshot form of Transactions.
type transactionsFile struct {
	Index   uint64              `json:"index"`
	Records []TransactionRecord `json:"records,omitempty"`
	Staged  []StagedOffsets     `json:"staged,omitempty"`
}

func (t *Transactions) file() transactionsFile {
	f := transactionsFile{Index: t.Index}
	for _, id := range t.IDs() {
		f.Records = append(f.Records, t.byID[id])
	}
	for _, pid := range slices.Sorted(maps.Keys(t.staged)) {
		f.Staged = append(f.Staged, StagedOffsets{ProducerID: pid, Commits: t.staged[pid]})
	}
	slices.SortFunc(f.Staged, func(a, b StagedOffsets) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return f
}

func (f transactionsFile) state() *Transactions {
	t := emptyTransactions()
	t.Index = f.Index
	for _, r := range f.Records {
		t.byID[r.TransactionalID] = r
	}
	for _, s := range f.Staged {
		t.staged[s.ProducerID] = s.Commits
	}
	return t
}
