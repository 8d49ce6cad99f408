package replication

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEndOffsetForFollowsKafka(t *testing.T) {
	entries := []EpochEntry{{0, 0}, {2, 10}, {5, 40}}
	check := func(epoch int32, wantEpoch int32, wantEnd int64) {
		t.Helper()
		gotEpoch, gotEnd := endOffsetFor(entries, epoch, 55)
		if gotEpoch != wantEpoch || gotEnd != wantEnd {
			t.Errorf("epoch %d: got (%d, %d), want (%d, %d)", epoch, gotEpoch, gotEnd, wantEpoch, wantEnd)
		}
	}
	check(0, 0, 10)
	check(1, 0, 10) // the largest epoch at or below 1 is 0, which ends where 2 starts
	check(2, 2, 40)
	check(4, 2, 40)
	check(5, 5, 55) // the newest epoch ends at the log end
	check(9, 5, 55)
	check(-1, -1, -1)
	if e, o := endOffsetFor(nil, 3, 7); e != -1 || o != -1 {
		t.Errorf("empty history: got (%d, %d)", e, o)
	}
}

func TestEpochHistoryIsDurableAndTrimmed(t *testing.T) {
	dir := t.TempDir()
	h, err := OpenEpochHistory(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []EpochEntry{{0, 0}, {1, 10}, {1, 12}, {3, 20}, {2, 25}} {
		if err := h.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Assign(4, 5); err == nil {
		t.Fatal("an epoch starting before the last one was accepted")
	}
	want := []EpochEntry{{0, 0}, {1, 10}, {3, 20}}
	reopened, err := OpenEpochHistory(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := reopened.Entries(); !equalEntries(got, want) {
		t.Fatalf("reopened: %v, want %v", got, want)
	}
	// A log that lost its tail in a crash drops the epochs beyond its end.
	trimmed, err := OpenEpochHistory(dir, 15)
	if err != nil {
		t.Fatal(err)
	}
	if got := trimmed.Entries(); !equalEntries(got, want[:2]) {
		t.Fatalf("trimmed at 15: %v", got)
	}
	if err := trimmed.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	if got := trimmed.Entries(); !equalEntries(got, want[:1]) || trimmed.LastEpoch() != 0 {
		t.Fatalf("truncated to 10: %v", got)
	}
	again, _ := OpenEpochHistory(dir, 100)
	if got := again.Entries(); !equalEntries(got, want[:1]) {
		t.Fatalf("truncation not durable: %v", got)
	}
}

func TestEpochHistoryRefusesGarbage(t *testing.T) {
	for _, content := range []string{"nonsense\n", epochFileHeader + "\n3 10\n2 20\n", epochFileHeader + "\n1\n", epochFileHeader + "\n1 -4\n"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, epochFileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenEpochHistory(dir, 100); err == nil {
			t.Errorf("%q was accepted", content)
		}
	}
}

func TestDivergencePoint(t *testing.T) {
	follower := []EpochEntry{{0, 0}, {1, 10}, {3, 30}}
	check := func(name string, leaderEpoch int32, endOffset, want int64, wantSettled bool) {
		t.Helper()
		if got, settled := divergencePoint(follower, 45, 0, leaderEpoch, endOffset); got != want || settled != wantSettled {
			t.Errorf("%s: got %d (settled %v), want %d (%v)", name, got, settled, want, wantSettled)
		}
	}
	check("same epoch, leader has more", 3, 60, 45, true)
	check("same epoch, leader has less", 3, 38, 38, true)
	check("our epoch 3 unknown to the leader, its epoch 1 ends at 25", 1, 25, 25, true)
	check("leader's epoch 2 we never had: cut at the end of our epoch 1, then ask about 1", 2, 33, 30, false)
	check("leader knows none of our epochs", -1, -1, 0, true)
	if got, settled := divergencePoint(nil, 12, 0, 4, 50); got != 12 || !settled {
		t.Errorf("a log without history is kept: %d", got)
	}
}

func equalEntries(a, b []EpochEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
