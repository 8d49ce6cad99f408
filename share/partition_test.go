package share

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{LockDuration: 10 * time.Second, DeliveryCountLimit: 3, MaxInFlight: 100}
}

// batches splits [first, last] into batches of size records.
func batches(first, last int64, size int64) []Batch {
	var out []Batch
	for b := first; b <= last; b += size {
		out = append(out, Batch{First: b, Last: min(b+size-1, last)})
	}
	return out
}

func wantRanges(t *testing.T, got []AcquiredRange, want ...AcquiredRange) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
}

func wantCode(t *testing.T, err error, want protocol.ErrorCode) {
	t.Helper()
	if want == protocol.None {
		if err != nil {
			t.Fatalf("error %v, want none", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %s", err, want.Name)
	}
}

func acks(first, last int64, types ...AckType) []Ack {
	return []Ack{{First: first, Last: last, Types: types}}
}

// checkPartition checks the package doc's invariants.
func checkPartition(t *testing.T, p *Partition) {
	t.Helper()
	if len(p.records) > 0 && p.records[0].state.terminal() {
		t.Fatalf("window starts with a %s record at %d", p.records[0].state, p.startOffset)
	}
	acquired := 0
	for i, r := range p.records {
		if (r.state == Acquired) != (r.owner != "") {
			t.Fatalf("record %d: state %s owner %q", p.startOffset+int64(i), r.state, r.owner)
		}
		if r.state == Acquired {
			acquired++
		}
		if r.state == Available && int(r.deliveryCount) >= p.config.DeliveryCountLimit {
			t.Fatalf("record %d available with delivery count %d", p.startOffset+int64(i), r.deliveryCount)
		}
	}
	if acquired != p.acquiredCount {
		t.Fatalf("acquiredCount %d, counted %d", p.acquiredCount, acquired)
	}
}

func TestMembersAcquireDistinctRecords(t *testing.T) {
	p := NewPartition(testConfig(), 10)
	offset, ok := p.NextFetchOffset(t0)
	if !ok || offset != 10 {
		t.Fatalf("next fetch offset %d %v, want 10", offset, ok)
	}
	wantRanges(t, p.Acquire(t0, "a", batches(10, 29, 5), 7, false), AcquiredRange{10, 19, 1}) // two whole batches
	offset, _ = p.NextFetchOffset(t0)
	if offset != 20 {
		t.Fatalf("next fetch offset %d, want 20", offset)
	}
	// b reads from 15 (a batch it may not take part of) and gets only what is available.
	wantRanges(t, p.Acquire(t0, "b", batches(15, 29, 5), 100, false), AcquiredRange{20, 29, 1})
	if p.EndOffset() != 30 || p.StartOffset() != 10 {
		t.Fatalf("window [%d, %d), want [10, 30)", p.StartOffset(), p.EndOffset())
	}
	if s := p.Summary(); s.Acquired != 20 || s.Available != 0 {
		t.Fatalf("summary %+v", s)
	}
	checkPartition(t, p)
}

func TestStrictAcquireStopsAtMaxRecords(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	wantRanges(t, p.Acquire(t0, "a", batches(0, 9, 10), 3, true), AcquiredRange{0, 2, 1})
	wantRanges(t, p.Acquire(t0, "b", batches(0, 9, 10), 3, true), AcquiredRange{3, 5, 1})
	checkPartition(t, p)
}

func TestAcceptAdvancesStartOnlyOverAContiguousPrefix(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 9, 10), 10, false)
	wantCode(t, p.Acknowledge(t0, "a", acks(5, 9, Accept)), protocol.None)
	if p.StartOffset() != 0 {
		t.Fatalf("start %d moved past unacknowledged records", p.StartOffset())
	}
	wantCode(t, p.Acknowledge(t0, "a", acks(0, 4, Accept)), protocol.None)
	if p.StartOffset() != 10 || p.EndOffset() != 10 {
		t.Fatalf("window [%d, %d), want [10, 10)", p.StartOffset(), p.EndOffset())
	}
	// Already done: acknowledging again is refused.
	wantCode(t, p.Acknowledge(t0, "a", acks(3, 3, Accept)), protocol.InvalidRecordState)
	checkPartition(t, p)
}

func TestReleaseRedeliversUntilTheDeliveryLimitArchives(t *testing.T) {
	p := NewPartition(testConfig(), 0) // limit 3
	for delivery := int16(1); delivery <= 3; delivery++ {
		wantRanges(t, p.Acquire(t0, "a", batches(0, 0, 1), 1, false), AcquiredRange{0, 0, delivery})
		wantCode(t, p.Acknowledge(t0, "a", acks(0, 0, Release)), protocol.None)
	}
	if p.StartOffset() != 1 {
		t.Fatalf("start %d: a record released past the limit must be archived", p.StartOffset())
	}
	if s := p.Summary(); s.ArchivedTotal != 1 {
		t.Fatalf("archived total %d, want 1", s.ArchivedTotal)
	}
	checkPartition(t, p)
}

func TestRejectArchivesAndGapArchives(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 3, 4), 4, false)
	wantCode(t, p.Acknowledge(t0, "a", []Ack{{First: 0, Last: 3, Types: []AckType{Reject, Gap, Accept, Reject}}}), protocol.None)
	s := p.Summary()
	if p.StartOffset() != 4 || s.ArchivedTotal != 3 || s.AcknowledgedTotal != 1 {
		t.Fatalf("start %d summary %+v", p.StartOffset(), s)
	}
}

func TestLockTimeoutMakesRecordsAvailableAndRefusesTheOldOwner(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 4, 5), 5, false)
	if got := p.NextDeadline(); !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next deadline %v", got)
	}
	later := t0.Add(10 * time.Second)
	wantCode(t, p.Acknowledge(later, "a", acks(0, 0, Accept)), protocol.InvalidRecordState)
	wantRanges(t, p.Acquire(later, "b", batches(0, 4, 5), 5, false), AcquiredRange{0, 4, 2})
	wantCode(t, p.Acknowledge(later, "b", acks(0, 4, Accept)), protocol.None)
	if !p.NextDeadline().IsZero() || p.StartOffset() != 5 {
		t.Fatalf("deadline %v start %d", p.NextDeadline(), p.StartOffset())
	}
}

func TestTimeoutPastTheLimitArchives(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	now := t0
	for range 3 {
		p.Acquire(now, "a", batches(0, 0, 1), 1, false)
		now = now.Add(10 * time.Second)
		if n := p.Expire(now); n != 1 {
			t.Fatalf("expired %d, want 1", n)
		}
	}
	if p.StartOffset() != 1 {
		t.Fatalf("start %d: timed out past the limit must archive", p.StartOffset())
	}
}

func TestAcknowledgeIsAllOrNothing(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 4, 5), 5, false)
	p.Acquire(t0, "b", batches(5, 9, 5), 5, false)
	wantCode(t, p.Acknowledge(t0, "a", []Ack{{First: 0, Last: 4, Types: []AckType{Accept}}, {First: 5, Last: 5, Types: []AckType{Accept}}}), protocol.InvalidRecordState)
	if s := p.Summary(); s.Acquired != 10 {
		t.Fatalf("a refused acknowledgement changed state: %+v", s)
	}
	wantCode(t, p.Acknowledge(t0, "b", acks(5, 9, Accept)), protocol.None)
	wantCode(t, p.Acknowledge(t0, "a", acks(10, 10, Accept)), protocol.InvalidRecordState) // beyond the window
	checkPartition(t, p)
}

func TestMalformedAcknowledgementsAreInvalidRequests(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 9, 10), 10, false)
	bad := [][]Ack{
		{{First: 3, Last: 2, Types: []AckType{Accept}}},
		{{First: 0, Last: 2, Types: []AckType{Accept, Accept}}},
		{{First: 0, Last: 0, Types: nil}},
		{{First: 0, Last: 0, Types: []AckType{5}}},
		{{First: 0, Last: 3, Types: []AckType{Accept}}, {First: 3, Last: 4, Types: []AckType{Accept}}},
		{{First: -1, Last: 0, Types: []AckType{Accept}}},
	}
	for _, a := range bad {
		wantCode(t, p.Acknowledge(t0, "a", a), protocol.InvalidRequest)
	}
	if s := p.Summary(); s.Acquired != 10 {
		t.Fatalf("summary %+v", s)
	}
}

func TestRenewExtendsTheLock(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 0, 1), 1, false)
	wantCode(t, p.Acknowledge(t0.Add(9*time.Second), "a", acks(0, 0, Renew)), protocol.None)
	wantCode(t, p.Acknowledge(t0.Add(18*time.Second), "a", acks(0, 0, Accept)), protocol.None)
}

func TestInFlightWindowIsBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInFlight = 8
	p := NewPartition(cfg, 0)
	wantRanges(t, p.Acquire(t0, "a", batches(0, 19, 5), 100, false), AcquiredRange{0, 7, 1})
	if _, ok := p.NextFetchOffset(t0); ok {
		t.Fatal("a full window of locked records offers a fetch offset")
	}
	wantCode(t, p.Acknowledge(t0, "a", acks(0, 1, Accept)), protocol.None)
	offset, ok := p.NextFetchOffset(t0)
	if !ok || offset != 8 {
		t.Fatalf("next fetch %d %v, want 8", offset, ok)
	}
	wantRanges(t, p.Acquire(t0, "b", batches(5, 19, 5), 100, false), AcquiredRange{8, 9, 1})
	checkPartition(t, p)
}

func TestReleaseMemberFreesOnlyItsRecords(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 4, 5), 5, false)
	p.Acquire(t0, "b", batches(5, 9, 5), 5, false)
	if n := p.ReleaseMember(t0, "a"); n != 5 {
		t.Fatalf("released %d, want 5", n)
	}
	wantRanges(t, p.Acquire(t0, "c", batches(0, 9, 5), 100, false), AcquiredRange{0, 4, 2})
	checkPartition(t, p)
}

func TestAdvanceStartDropsWhatLeftTheLog(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 9, 10), 10, false)
	p.AdvanceStart(4)
	if p.StartOffset() != 4 || p.Summary().Acquired != 6 {
		t.Fatalf("start %d summary %+v", p.StartOffset(), p.Summary())
	}
	wantCode(t, p.Acknowledge(t0, "a", acks(2, 2, Accept)), protocol.InvalidRecordState)
	p.AdvanceStart(50)
	if p.StartOffset() != 50 || p.EndOffset() != 50 || p.Summary().Acquired != 0 {
		t.Fatalf("window [%d, %d) %+v", p.StartOffset(), p.EndOffset(), p.Summary())
	}
	checkPartition(t, p)
}

func TestGapsInTheLogAreArchived(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	wantRanges(t, p.Acquire(t0, "a", []Batch{{First: 3, Last: 4}}, 10, false), AcquiredRange{3, 4, 1})
	if p.StartOffset() != 3 {
		t.Fatalf("start %d, want 3: missing offsets are done", p.StartOffset())
	}
	checkPartition(t, p)
}

func TestCheckpointRoundTrip(t *testing.T) {
	p := NewPartition(testConfig(), 100)
	if !p.Dirty() {
		t.Fatal("a new partition must persist its start")
	}
	p.Acquire(t0, "a", batches(100, 119, 10), 20, false)
	wantCode(t, p.Acknowledge(t0, "a", acks(100, 101, Accept)), protocol.None)
	wantCode(t, p.Acknowledge(t0, "a", acks(105, 106, Reject)), protocol.None)
	wantCode(t, p.Acknowledge(t0, "a", acks(110, 110, Release)), protocol.None)
	cp := p.Checkpoint()
	if p.Dirty() {
		t.Fatal("dirty after checkpoint")
	}
	want := Checkpoint{StartOffset: 102, Ranges: []StateRange{
		{102, 104, Available, 1}, {105, 106, Archived, 1}, {107, 119, Available, 1},
	}}
	if !reflect.DeepEqual(cp, want) {
		t.Fatalf("checkpoint %+v\nwant       %+v", cp, want)
	}
	restored, err := Restore(testConfig(), cp)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.Checkpoint(), want) {
		t.Fatalf("restored checkpoint %+v", restored.Checkpoint())
	}
	// Everything acquired before is available again, with its delivery count.
	wantRanges(t, restored.Acquire(t0, "b", batches(100, 119, 10), 100, false), AcquiredRange{102, 104, 2}, AcquiredRange{107, 119, 2})
	checkPartition(t, restored)
}

func TestRestoreRefusesBadCheckpoints(t *testing.T) {
	for _, cp := range []Checkpoint{
		{StartOffset: -1},
		{StartOffset: 10, Ranges: []StateRange{{5, 6, Archived, 1}}},
		{StartOffset: 0, Ranges: []StateRange{{5, 6, Archived, 1}, {6, 7, Archived, 1}}},
		{StartOffset: 0, Ranges: []StateRange{{5, 6, Acquired, 1}}},
		{StartOffset: 0, Ranges: []StateRange{{5, 6, Archived, -1}}},
		{StartOffset: 0, Ranges: []StateRange{{0, 1 << 40, Archived, 1}}},
	} {
		if _, err := Restore(testConfig(), cp); err == nil {
			t.Fatalf("restored %+v", cp)
		}
	}
	// A record restored available at the limit is archived.
	p, err := Restore(testConfig(), Checkpoint{StartOffset: 0, Ranges: []StateRange{{0, 0, Available, 3}}})
	if err != nil || p.StartOffset() != 1 {
		t.Fatalf("start %d err %v", p.StartOffset(), err)
	}
}

func TestLagCountsWhatIsNotDone(t *testing.T) {
	p := NewPartition(testConfig(), 0)
	p.Acquire(t0, "a", batches(0, 9, 10), 10, false)
	wantCode(t, p.Acknowledge(t0, "a", acks(5, 6, Accept)), protocol.None)
	if lag := p.Lag(20); lag != 18 {
		t.Fatalf("lag %d, want 18", lag)
	}
	if lag := p.Lag(0); lag != 0 {
		t.Fatalf("lag %d, want 0", lag)
	}
}

func TestHoldsTracksTheMembersLocks(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPartition(Config{LockDuration: time.Second, DeliveryCountLimit: 3, MaxInFlight: 10}, 0)
	p.Acquire(now, "a", []Batch{{First: 0, Last: 1}}, 1, true)
	if !p.Holds(now, "a") || p.Holds(now, "b") {
		t.Fatal("a holds offset 0, b nothing")
	}
	if p.Holds(now.Add(time.Second), "a") {
		t.Fatal("a lock that ended is not held")
	}
}
