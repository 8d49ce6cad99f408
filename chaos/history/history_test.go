package history

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRecordedHistoryReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r, err := NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Process: "producer-1", Type: Invoke, F: Send, Op: 1, Topic: "t", Key: "k", Value: "v1", Idempotent: true},
		{Process: "producer-1", Type: OK, F: Send, Op: 1, Topic: "t", Partition: 2, Offset: 7, Value: "v1"},
		{Process: "reader-1", Type: OK, F: Poll, Records: []Record{{2, 7, "v1"}}},
		{Process: "nemesis", F: FaultStart, Fault: "kill", Nodes: []int32{1, 2}},
		{Process: "checker", F: Replica, Node: 1, Partition: 2, Batches: []Batch{{0, 7, 100, 3, 0xdeadbeef}}},
		{Process: "member-1", Type: OK, F: Commit, Offsets: map[int32]int64{0: 5, 3: 9}},
	}
	for i := range want {
		want[i].Time = r.Record(want[i])
	}
	if kept := r.Events(); len(kept) != 0 {
		t.Fatalf("a recorder with a file kept %d events in memory", len(kept))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time < got[i-1].Time {
			t.Fatalf("event %d stamped before event %d", i, i-1)
		}
	}
}

// TestRecorderNeverMovesRecordedEvents: recording never copies what is already kept (a copy of a
// long run's events held the lock, and with it every client, for seconds).
func TestRecorderNeverMovesRecordedEvents(t *testing.T) {
	r, err := NewRecorder("")
	if err != nil {
		t.Fatal(err)
	}
	r.Record(Event{Process: "producer-1", Type: Invoke, F: Send, Op: 1})
	first := &r.mu.blocks[0][0]
	const n = 3*blockEvents + 10
	for op := int64(2); op <= n; op++ {
		r.Record(Event{Process: "producer-1", Type: Invoke, F: Send, Op: op})
	}
	if &r.mu.blocks[0][0] != first {
		t.Fatal("the first event moved while later ones were recorded")
	}
	events := r.Events()
	if len(events) != n {
		t.Fatalf("%d events, want %d", len(events), n)
	}
	for i, e := range events {
		if e.Op != int64(i+1) {
			t.Fatalf("event %d is op %d, want %d", i, e.Op, i+1)
		}
	}
}
