package txn

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/protocol"
)

func TestLifecycle(t *testing.T) {
	d := Init(nil, InitRequest{TransactionalID: "t", ProducerID: -1, ProducerEpoch: -1, TimeoutMillis: 1000, NowMillis: 1}, 60000)
	if d.Err != nil || !d.NewProducerID || d.Next.State != Empty {
		t.Fatalf("first init: %+v", d)
	}
	m := d.Next
	m.ProducerID = 7
	p0, p1 := Partition{"a", 0}, Partition{"a", 1}
	next, changed, err := AddPartitions(&m, "t", 7, 0, []Partition{p1, p0}, 5)
	if err != nil || !changed || next.State != Ongoing || next.StartMillis != 5 || !next.HasPartition(p0) || len(next.Partitions) != 2 {
		t.Fatalf("add partitions: %+v %v %v", next, changed, err)
	}
	again, changed, err := AddPartitions(&next, "t", 7, 0, []Partition{p0}, 6)
	if err != nil || changed || again.StartMillis != 5 {
		t.Fatalf("re-add: changed %v err %v", changed, err)
	}
	withGroup, changed, err := AddGroup(&next, "t", 7, 0, "g", 7)
	if err != nil || !changed || !withGroup.HasGroup("g") || len(next.Groups) != 0 {
		t.Fatalf("add group: %+v %v", withGroup, err)
	}
	if err := CheckOffsetCommit(&withGroup, "t", 7, 0, "g"); err != nil {
		t.Fatal(err)
	}
	if err := CheckOffsetCommit(&withGroup, "t", 7, 0, "other"); !errors.Is(err, protocol.InvalidTxnState) {
		t.Fatalf("offset commit for a group not added: %v", err)
	}
	prepared, action, err := End(&withGroup, "t", 7, 0, true, 8)
	if err != nil || action != EndPrepare || prepared.State != PrepareCommit {
		t.Fatalf("end: %+v %v", prepared, err)
	}
	if _, _, err := AddPartitions(&prepared, "t", 7, 0, []Partition{p0}, 9); !errors.Is(err, protocol.ConcurrentTransactions) {
		t.Fatalf("add while preparing: %v", err)
	}
	if _, _, err := End(&prepared, "t", 7, 0, true, 9); !errors.Is(err, protocol.ConcurrentTransactions) {
		t.Fatalf("end while preparing: %v", err)
	}
	done := Complete(prepared, 10)
	if done.State != CompleteCommit || len(done.Partitions) != 0 || len(done.Groups) != 0 {
		t.Fatalf("complete: %+v", done)
	}
	if _, action, err := End(&done, "t", 7, 0, true, 11); err != nil || action != EndDone {
		t.Fatalf("retried commit: %v %v", action, err)
	}
	if _, _, err := End(&done, "t", 7, 0, false, 11); !errors.Is(err, protocol.InvalidTxnState) {
		t.Fatalf("abort after commit: %v", err)
	}
	d = Init(&done, InitRequest{TransactionalID: "t", ProducerID: -1, ProducerEpoch: -1, TimeoutMillis: 1000, NowMillis: 12}, 60000)
	if d.Err != nil || d.NewProducerID || d.Next.ProducerID != 7 || d.Next.ProducerEpoch != 1 {
		t.Fatalf("re-init: %+v", d)
	}
	if _, _, err := AddPartitions(&d.Next, "t", 7, 0, []Partition{p0}, 13); !errors.Is(err, protocol.ProducerFenced) {
		t.Fatalf("zombie add: %v", err)
	}
	if _, _, err := AddPartitions(&d.Next, "t", 8, 1, []Partition{p0}, 13); !errors.Is(err, protocol.InvalidProducerIDMapping) {
		t.Fatalf("wrong id: %v", err)
	}
}

func TestInitAbortsOngoingAndTimeouts(t *testing.T) {
	m := Metadata{TransactionalID: "t", ProducerID: 3, ProducerEpoch: 4, LastProducerEpoch: -1, TimeoutMillis: 100, State: Ongoing,
		StartMillis: 1000, Partitions: []Partition{{"a", 0}}}
	if m.Expired(1100) || !m.Expired(1101) {
		t.Fatal("expiry is strictly after the timeout")
	}
	d := Init(&m, InitRequest{TransactionalID: "t", ProducerID: -1, ProducerEpoch: -1, TimeoutMillis: 100, NowMillis: 1050}, 1000)
	if !d.AbortFirst || !errors.Is(d.Err, protocol.ConcurrentTransactions) || d.Next.State != PrepareAbort || d.Next.ProducerEpoch != 5 || len(d.Next.Partitions) != 1 {
		t.Fatalf("init over ongoing: %+v", d)
	}
	fenced := Complete(d.Next, 1060)
	// An instance fenced by a new one may not come back; one whose transaction timed out may (KIP-588).
	if d := Init(&fenced, InitRequest{TransactionalID: "t", ProducerID: 3, ProducerEpoch: 4, TimeoutMillis: 100}, 1000); !errors.Is(d.Err, protocol.ProducerFenced) {
		t.Fatalf("fenced instance re-init: %+v", d)
	}
	timedOut, err := FenceAbort(m, 1200, true)
	if err != nil || timedOut.ProducerEpoch != 5 || timedOut.LastProducerEpoch != 4 {
		t.Fatalf("timeout abort: %+v %v", timedOut, err)
	}
	if _, _, err := End(&timedOut, "t", 3, 4, true, 1201); !errors.Is(err, protocol.InvalidProducerEpoch) {
		t.Fatalf("commit after a timeout abort: %v", err)
	}
	aborted := Complete(timedOut, 1210)
	if d := Init(&aborted, InitRequest{TransactionalID: "t", ProducerID: 3, ProducerEpoch: 4, TimeoutMillis: 100}, 1000); d.Err != nil || d.Next.ProducerEpoch != 6 {
		t.Fatalf("KIP-588 re-init: %+v", d)
	}
	if d := Init(&aborted, InitRequest{TransactionalID: "t", ProducerID: 3, ProducerEpoch: 2, TimeoutMillis: 100}, 1000); !errors.Is(d.Err, protocol.ProducerFenced) {
		t.Fatalf("stale re-init: %+v", d)
	}
	if d := Init(nil, InitRequest{TransactionalID: "t", TimeoutMillis: 2000}, 1000); !errors.Is(d.Err, protocol.InvalidTransactionTimeout) {
		t.Fatalf("timeout over max: %+v", d)
	}
	maxed := Metadata{TransactionalID: "t", ProducerID: 3, ProducerEpoch: maxEpoch, State: CompleteCommit}
	if d := Init(&maxed, InitRequest{TransactionalID: "t", ProducerID: -1, ProducerEpoch: -1, TimeoutMillis: 100}, 1000); !d.NewProducerID {
		t.Fatalf("exhausted epoch keeps the id: %+v", d)
	}
	if _, err := FenceAbort(aborted, 1, true); !errors.Is(err, protocol.InvalidTxnState) {
		t.Fatalf("fence of a completed transaction: %v", err)
	}
}
