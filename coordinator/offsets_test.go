package coordinator

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/group"
)

func commitOf(group, topic string, partition int32, offset int64) OffsetCommit {
	return OffsetCommit{Group: group, TopicPartition: TopicPartition{Topic: topic, Partition: partition},
		CommittedOffset: CommittedOffset{Offset: offset, LeaderEpoch: 3, Metadata: "m", CommitTimeMillis: 1000}}
}

func TestFSMOffsetCommands(t *testing.T) {
	f := newFSM(discardPublish, nil)
	applyAt(t, f, 1, &commitOffsetsCommand{Commits: []OffsetCommit{
		commitOf("g1", "t", 0, 10), commitOf("g1", "t", 1, 20), commitOf("g2", "t", 0, 5), commitOf("g1", "t", 0, 11),
	}})
	before := f.offsets.Load()
	if before.Index != 1 {
		t.Fatalf("offsets index %d, want 1", before.Index)
	}
	if got, _ := before.Lookup("g1", "t", 0); got.Offset != 11 || got.LeaderEpoch != 3 || got.Metadata != "m" {
		t.Fatalf("g1 t-0 = %+v, want the later commit", got)
	}
	if f.state.Load().Version != 0 {
		t.Fatal("an offsets change bumped the metadata version")
	}
	applyAt(t, f, 2, &commitOffsetsCommand{Commits: []OffsetCommit{commitOf("g1", "t", 0, 12)}})
	if got, _ := before.Lookup("g1", "t", 0); got.Offset != 11 {
		t.Fatal("applying changed an earlier snapshot")
	}
	applyAt(t, f, 3, &deletePartitionOffsetsCommand{Group: "g1", Partitions: []TopicPartition{{Topic: "t", Partition: 1}}})
	if _, ok := f.offsets.Load().Lookup("g1", "t", 1); ok {
		t.Fatal("deleted partition offset still there")
	}
	applyAt(t, f, 4, &deleteGroupOffsetsCommand{Groups: []string{"g2", "absent"}})
	if got := f.offsets.Load().Groups(); !reflect.DeepEqual(got, []string{"g1"}) {
		t.Fatalf("groups %v", got)
	}
	applyAt(t, f, 5, &deletePartitionOffsetsCommand{Group: "g1", Partitions: []TopicPartition{{Topic: "t", Partition: 0}}})
	if got := f.offsets.Load().Groups(); len(got) != 0 {
		t.Fatalf("a group without offsets remains: %v", got)
	}
	if result := applyAt(t, f, 6, &commitOffsetsCommand{Commits: []OffsetCommit{commitOf("", "t", 0, 1)}}); result.err == nil {
		t.Fatal("a commit without a group applied")
	}
}

func TestFSMSnapshotCarriesOffsets(t *testing.T) {
	f := newFSM(discardPublish, nil)
	applyAt(t, f, 1, &initClusterCommand{ClusterID: "c"})
	applyAt(t, f, 2, &commitOffsetsCommand{Commits: []OffsetCommit{commitOf("b", "t", 1, 7), commitOf("a", "u", 0, 9), commitOf("a", "t", 2, 8)}})
	data := snapshotBytes(t, f)
	restored := newFSM(discardPublish, nil)
	if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.offsets.Load(), f.offsets.Load()) {
		t.Fatalf("restored offsets %+v, want %+v", restored.offsets.Load(), f.offsets.Load())
	}
	if again := snapshotBytes(t, restored); !bytes.Equal(again, data) {
		t.Fatalf("equal states, different snapshots:\n%s\n%s", data, again)
	}
	// A format 1 snapshot (before offsets) still restores, with no offsets.
	old := []byte(`{"format":1,"version":1,"clusterID":"c","brokers":[],"topics":[]}`)
	if err := restored.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
		t.Fatal(err)
	}
	if len(restored.offsets.Load().Groups()) != 0 || restored.state.Load().ClusterID != "c" {
		t.Fatal("format 1 snapshot restored wrongly")
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestCommitOffsetsBatchesAndSurvivesReopen commits from many goroutines at once: every commit is
// visible when its callback runs, they share Raft entries, and they survive a reopen from the log
// and from a snapshot.
func TestCommitOffsetsBatchesAndSurvivesReopen(t *testing.T) {
	config := testConfig(t.TempDir())
	config.TrailingLogs = 0
	c := openTest(t, config)
	const callers, rounds = 50, 10
	var wg sync.WaitGroup
	indexBefore := c.Offsets().Index
	for caller := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				done := make(chan error, 1)
				group := fmt.Sprintf("g%d", caller%5)
				c.CommitOffsets([]OffsetCommit{commitOf(group, "t", int32(caller), int64(round))}, func(err error) { done <- err })
				if err := <-done; err != nil {
					t.Error(err)
					return
				}
				if got, _ := c.Offsets().Lookup(group, "t", int32(caller)); got.Offset != int64(round) {
					t.Errorf("after commit %d the snapshot holds %d", round, got.Offset)
				}
			}
		}()
	}
	wg.Wait()
	entries := c.Offsets().Index - indexBefore
	t.Logf("%d commit calls in at most %d Raft entries", callers*rounds, entries)
	if entries >= callers*rounds {
		t.Errorf("no batching: %d entries for %d commits", entries, callers*rounds)
	}
	want := c.Offsets()
	c = reopen(t, c)
	if !reflect.DeepEqual(c.Offsets().groups, want.groups) {
		t.Fatal("offsets changed across a reopen from the log")
	}
	// One more commit after the reopen, so that the snapshot covers the new term's entries.
	done := make(chan error, 1)
	c.CommitOffsets([]OffsetCommit{commitOf("g9", "t", 0, 1)}, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want = c.Offsets()
	if err := c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c = reopen(t, c)
	if !reflect.DeepEqual(c.Offsets().groups, want.groups) {
		t.Fatal("offsets changed across a reopen from a snapshot")
	}
	if err := c.DeleteGroupOffsets(testContext(t), []string{"g0"}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePartitionOffsets(testContext(t), "g1", []TopicPartition{{Topic: "t", Partition: 1}}); err != nil {
		t.Fatal(err)
	}
	if c.Offsets().Group("g0") != nil || len(c.Offsets().Group("g1")) != callers/5-1 {
		t.Fatal("deletions not applied")
	}
	c.Close()
	c.CommitOffsets([]OffsetCommit{commitOf("g", "t", 0, 1)}, func(err error) { done <- err })
	if err := <-done; err == nil {
		t.Fatal("commit after close succeeded")
	}
}

// TestDeleteTopicDropsItsOffsets: committed offsets of a deleted topic go with it (in the log and
// after a replay), and other topics' offsets stay.
func TestDeleteTopicDropsItsOffsets(t *testing.T) {
	c := openWithBrokers(t, 1)
	mustCreate(t, c, "gone", 2, 1, nil)
	mustCreate(t, c, "kept", 1, 1, nil)
	done := make(chan error, 1)
	c.CommitOffsets([]OffsetCommit{commitOf("g", "gone", 0, 5), commitOf("g", "gone", 1, 6), commitOf("g", "kept", 0, 7), commitOf("h", "gone", 0, 8)},
		func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(testContext(t), "gone"); err != nil {
		t.Fatal(err)
	}
	check := func(c *Coordinator) {
		t.Helper()
		if _, ok := c.Offsets().Lookup("g", "gone", 0); ok {
			t.Fatal("offset of a deleted topic survived")
		}
		if c.Offsets().Group("h") != nil {
			t.Fatal("group with only offsets of the deleted topic survived")
		}
		if committed, ok := c.Offsets().Lookup("g", "kept", 0); !ok || committed.Offset != 7 {
			t.Fatalf("offset of another topic: %+v %v", committed, ok)
		}
	}
	check(c)
	check(reopen(t, c))
}

// A commit accepted by a node that no longer coordinates its group when the entry applies is
// dropped: the group's new coordinator may already have stored a later offset (the chaos suite's
// offsets read backwards after a one-way cut delayed a commit by seconds).
func TestCommitFromAFormerCoordinatorIsDropped(t *testing.T) {
	meta := &Metadata{Brokers: map[int32]Broker{1: {NodeID: 1}, 2: {NodeID: 2}, 3: {NodeID: 3}}}
	owner := group.CoordinatorFor("g", meta.LiveBrokerIDs())
	var former int32 = 1
	if owner == former {
		former = 2
	}
	commit := func(by *int32, offset int64) OffsetCommit {
		return OffsetCommit{Group: "g", Coordinator: by, TopicPartition: TopicPartition{Topic: "t", Partition: 0},
			CommittedOffset: CommittedOffset{Offset: offset, LeaderEpoch: -1, CommitTimeMillis: offset}}
	}
	state := emptyOffsets()
	next, result := (&commitOffsetsCommand{Commits: []OffsetCommit{commit(&owner, 50)}}).applyOffsets(state, meta)
	if result.err != nil || next == nil {
		t.Fatalf("the coordinator's commit: %v", result.err)
	}
	late, _ := (&commitOffsetsCommand{Commits: []OffsetCommit{commit(&former, 10)}}).applyOffsets(next, meta)
	if late != nil {
		if got, _ := late.Lookup("g", "t", 0); got.Offset != 50 {
			t.Fatalf("a former coordinator's late commit moved the offset back to %d", got.Offset)
		}
	}
	unchecked, _ := (&commitOffsetsCommand{Commits: []OffsetCommit{commit(nil, 60)}}).applyOffsets(next, meta)
	if got, _ := unchecked.Lookup("g", "t", 0); got.Offset != 60 {
		t.Fatalf("a commit without a coordinator (an older log entry) must apply: got %d", got.Offset)
	}
}

// A commit accepted while the group's coordinator had it, applied after that coordinator lost the
// group and got it back (fenced, then unfenced), is dropped: meanwhile the members committed a
// later offset through another coordinator (the chaos suite's offsets read backwards after a
// raft-cut fenced a coordinator whose forwarded commit applied once the cut healed). The FSM dates
// every change of the live broker set, and snapshots keep the date.
func TestCommitAcceptedUnderAnotherLiveSetIsDropped(t *testing.T) {
	f := newFSM(discardPublish, nil)
	index := uint64(0)
	apply := func(c command) applyResult {
		index++
		return applyAt(t, f, index, c)
	}
	for id := int32(1); id <= 3; id++ {
		apply(&registerBrokerCommand{Broker: Broker{NodeID: id, Host: "127.0.0.1", Port: 9090 + id}})
	}
	owner := group.CoordinatorFor("g", f.state.Load().LiveBrokerIDs())
	accepted := f.state.Load().LiveSince
	commit := func(offset int64, liveSince uint64) *commitOffsetsCommand {
		return &commitOffsetsCommand{Commits: []OffsetCommit{{Group: "g", Coordinator: &owner, LiveSince: &liveSince,
			TopicPartition:  TopicPartition{Topic: "t", Partition: 0},
			CommittedOffset: CommittedOffset{Offset: offset, LeaderEpoch: -1, CommitTimeMillis: offset}}}}
	}
	apply(&fenceBrokerCommand{NodeID: owner})
	if f.state.Load().LiveSince == accepted {
		t.Fatal("fencing the coordinator did not change LiveSince")
	}
	apply(&unfenceBrokerCommand{NodeID: owner})
	now := f.state.Load().LiveSince
	if now != index {
		t.Fatalf("LiveSince %d after the unfence at index %d", now, index)
	}
	apply(commit(50, now))
	apply(commit(10, accepted)) // the stale one, accepted before the fence
	if got, _ := f.offsets.Load().Lookup("g", "t", 0); got.Offset != 50 {
		t.Fatalf("a commit accepted under an older live set moved the offset to %d, want 50", got.Offset)
	}
	restored := newFSM(discardPublish, nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if got := restored.state.Load().LiveSince; got != now {
		t.Fatalf("LiveSince %d after a snapshot, want %d", got, now)
	}
}
