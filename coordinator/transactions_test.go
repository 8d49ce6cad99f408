package coordinator

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/txn"
)

// TestFSMTransactions drives one transactional id through a committed and an aborted transaction
// with staged offsets, checking compare-and-set, staging refusals, the offsets' visibility at
// PrepareCommit and the snapshot round trip.
func TestFSMTransactions(t *testing.T) {
	f := newFSM(discardPublish, nil)
	record := func(state txn.State, epoch int16, groups ...string) txn.Metadata {
		return txn.Metadata{TransactionalID: "t", ProducerID: 5, ProducerEpoch: epoch, State: state, Groups: groups, TimeoutMillis: 1000}
	}
	write := func(index uint64, w TransactionWrite) TransactionWriteResult {
		t.Helper()
		result := applyAt(t, f, index, &writeTransactionsCommand{TransactionWrite: w})
		if result.err != nil {
			t.Fatal(result.err)
		}
		return result.transactions
	}
	if r := write(1, TransactionWrite{Updates: []TransactionUpdate{{Metadata: record(txn.Empty, 0)}}}); len(r.Conflicts) != 0 {
		t.Fatalf("first write: %+v", r)
	}
	if r := write(2, TransactionWrite{Updates: []TransactionUpdate{{Metadata: record(txn.Ongoing, 0)}}}); !slices.Equal(r.Conflicts, []string{"t"}) {
		t.Fatalf("write based on a missing record: %+v", r)
	}
	write(3, TransactionWrite{Updates: []TransactionUpdate{{Metadata: record(txn.Ongoing, 0, "g"), BasedOn: 1}}})
	stage := func(epoch int16, group string, offset int64) StagedOffsets {
		return StagedOffsets{TransactionalID: "t", ProducerID: 5, ProducerEpoch: epoch, Commits: []OffsetCommit{commitOf(group, "in", 0, offset)}}
	}
	if r := write(4, TransactionWrite{Stage: []StagedOffsets{stage(0, "g", 10), stage(1, "g", 11), stage(0, "h", 12)}}); !slices.Equal(r.Refused, []int{1, 2}) {
		t.Fatalf("staging refusals: %+v", r)
	}
	tp := TopicPartition{Topic: "in", Partition: 0}
	if !f.transactions.Load().HasStaged("g", tp) {
		t.Fatal("staged offset not visible as pending")
	}
	if _, ok := f.offsets.Load().Lookup("g", "in", 0); ok {
		t.Fatal("staged offset committed before the transaction")
	}
	snapshot := snapshotBytes(t, f)
	write(5, TransactionWrite{Updates: []TransactionUpdate{{Metadata: record(txn.PrepareCommit, 0, "g"), BasedOn: 3}}})
	if c, ok := f.offsets.Load().Lookup("g", "in", 0); !ok || c.Offset != 10 || f.transactions.Load().HasStaged("g", tp) {
		t.Fatalf("offsets after PrepareCommit: %+v %v", c, ok)
	}
	// An aborted transaction's staged offsets vanish.
	write(6, TransactionWrite{Updates: []TransactionUpdate{{Metadata: record(txn.Ongoing, 0, "g"), BasedOn: 5}}})
	write(7, TransactionWrite{Stage: []StagedOffsets{stage(0, "g", 20)}})
	write(8, TransactionWrite{Updates: []TransactionUpdate{{Metadata: record(txn.PrepareAbort, 0, "g"), BasedOn: 6}}})
	if c, _ := f.offsets.Load().Lookup("g", "in", 0); c.Offset != 10 || f.transactions.Load().HasStaged("g", tp) {
		t.Fatalf("aborted offsets leaked: %+v", c)
	}

	restored := newFSM(discardPublish, nil)
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshot)}); err != nil {
		t.Fatal(err)
	}
	got, _ := restored.transactions.Load().Lookup("t")
	if got.Version != 3 || got.State != txn.Ongoing || !restored.transactions.Load().HasStaged("g", tp) {
		t.Fatalf("restored %+v", got)
	}
	if again := snapshotBytes(t, restored); !bytes.Equal(again, snapshot) {
		t.Fatalf("equal states, different snapshots:\n%s\n%s", snapshot, again)
	}
	if !reflect.DeepEqual(restored.transactions.Load().Staged(5), []OffsetCommit{commitOf("g", "in", 0, 10)}) {
		t.Fatalf("restored staged %+v", restored.transactions.Load().Staged(5))
	}
}
