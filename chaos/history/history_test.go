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
	r.Record(Event{Process: "producer-1", Type: Invoke, F: Send, Op: 1, Topic: "t", Key: "k", Value: "v1", Idempotent: true})
	r.Record(Event{Process: "producer-1", Type: OK, F: Send, Op: 1, Topic: "t", Partition: 2, Offset: 7, Value: "v1"})
	r.Record(Event{Process: "reader-1", Type: OK, F: Poll, Records: []Record{{2, 7, "v1"}}})
	r.Record(Event{Process: "nemesis", F: FaultStart, Fault: "kill", Nodes: []int32{1, 2}})
	r.Record(Event{Process: "checker", F: Replica, Node: 1, Partition: 2, Batches: []Batch{{0, 7, 100, 3, 0xdeadbeef}}})
	r.Record(Event{Process: "member-1", Type: OK, F: Commit, Offsets: map[int32]int64{0: 5, 3: 9}})
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
	if want := r.Events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time < got[i-1].Time {
			t.Fatalf("event %d stamped before event %d", i, i-1)
		}
	}
}
