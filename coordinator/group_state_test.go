package coordinator

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func shareWrite(group, topic string, partition int32, start int64) SharePartitionWrite {
	return SharePartitionWrite{Group: group, TopicPartition: TopicPartition{Topic: topic, Partition: partition},
		State: &SharePartitionState{TopicID: [16]byte{9}, StartOffset: start, Ranges: []ShareStateRange{{First: start + 2, Last: start + 3, State: 2, DeliveryCount: 1}}}}
}

func TestFSMGroupStateCommands(t *testing.T) {
	f := newFSM(discardPublish, nil)
	applyAt(t, f, 1, &writeGroupStateCommand{GroupStateWrite{
		Groups:          []GroupRecordWrite{{Group: "q", Record: &GroupRecord{Type: GroupTypeShare, Body: []byte(`{"epoch":3}`)}}},
		SharePartitions: []SharePartitionWrite{shareWrite("q", "t", 0, 10), shareWrite("q", "t", 1, 20), shareWrite("r", "t", 0, 5)},
	}})
	before := f.groupState.Load()
	if before.Index != 1 || f.state.Load().Version != 0 {
		t.Fatalf("index %d, metadata version %d", before.Index, f.state.Load().Version)
	}
	if got, ok := before.SharePartition("q", "t", 1); !ok || got.StartOffset != 20 || len(got.Ranges) != 1 {
		t.Fatalf("q t-1 = %+v %v", got, ok)
	}
	applyAt(t, f, 2, &writeGroupStateCommand{GroupStateWrite{SharePartitions: []SharePartitionWrite{
		shareWrite("q", "t", 0, 11), {Group: "q", TopicPartition: TopicPartition{Topic: "t", Partition: 1}},
	}}})
	if got, _ := before.SharePartition("q", "t", 0); got.StartOffset != 10 {
		t.Fatal("applying changed an earlier snapshot")
	}
	now := f.groupState.Load()
	if got, _ := now.SharePartition("q", "t", 0); got.StartOffset != 11 {
		t.Fatalf("q t-0 start %d, want 11", got.StartOffset)
	}
	if _, ok := now.SharePartition("q", "t", 1); ok {
		t.Fatal("a deleted share partition remains")
	}
	applyAt(t, f, 3, &alterGroupConfigsCommand{Group: "q", Set: map[string]string{GroupConfigShareAutoOffsetReset: "earliest"}})
	if got := f.groupState.Load().Configs("q"); got[GroupConfigShareAutoOffsetReset] != "earliest" {
		t.Fatalf("configs %v", got)
	}
	if got := f.groupState.Load().Groups(); !reflect.DeepEqual(got, []string{"q", "r"}) {
		t.Fatalf("groups %v", got)
	}
	applyAt(t, f, 4, &writeGroupStateCommand{GroupStateWrite{DeleteGroups: []string{"q"}}})
	after := f.groupState.Load()
	if _, ok := after.Record("q"); ok || after.SharePartitions("q") != nil || after.Configs("q") != nil {
		t.Fatal("a deleted group left state behind")
	}
	for _, bad := range []GroupStateWrite{
		{Groups: []GroupRecordWrite{{Group: "", Record: &GroupRecord{Type: GroupTypeShare}}}},
		{Groups: []GroupRecordWrite{{Group: "g", Record: &GroupRecord{Type: "classic"}}}},
		{SharePartitions: []SharePartitionWrite{{Group: "g", TopicPartition: TopicPartition{Topic: "", Partition: 0}}}},
	} {
		if result := applyAt(t, f, 5, &writeGroupStateCommand{bad}); !errors.Is(result.err, errMalformedCommand) {
			t.Fatalf("%+v applied: %v", bad, result.err)
		}
	}
}

func TestFSMSnapshotCarriesGroupState(t *testing.T) {
	f := newFSM(discardPublish, nil)
	applyAt(t, f, 1, &initClusterCommand{ClusterID: "c"})
	applyAt(t, f, 2, &writeGroupStateCommand{GroupStateWrite{
		Groups:          []GroupRecordWrite{{Group: "cg", Record: &GroupRecord{Type: GroupTypeConsumer, Body: []byte("x")}}},
		SharePartitions: []SharePartitionWrite{shareWrite("q", "b", 0, 1), shareWrite("q", "a", 2, 3)},
	}})
	applyAt(t, f, 3, &alterGroupConfigsCommand{Group: "q", Set: map[string]string{GroupConfigShareDeliveryCountLimit: "3"}})
	data := snapshotBytes(t, f)
	restored := newFSM(discardPublish, nil)
	if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.groupState.Load(), f.groupState.Load()) {
		t.Fatalf("restored %+v, want %+v", restored.groupState.Load(), f.groupState.Load())
	}
	if again := snapshotBytes(t, restored); !bytes.Equal(again, data) {
		t.Fatalf("equal states, different snapshots:\n%s\n%s", data, again)
	}
	// A format 3 snapshot (before group state) restores with none.
	old := []byte(`{"format":3,"version":1,"clusterID":"c","brokers":[],"topics":[]}`)
	if err := restored.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
		t.Fatal(err)
	}
	if len(restored.groupState.Load().Groups()) != 0 {
		t.Fatal("format 3 snapshot restored group state")
	}
}

func TestGroupStateSurvivesReopen(t *testing.T) {
	config := testConfig(t.TempDir())
	c := openTest(t, config)
	write := GroupStateWrite{SharePartitions: []SharePartitionWrite{shareWrite("q", "t", 0, 42)}}
	if err := c.WriteGroupState(testContext(t), write); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterGroupConfigs(testContext(t), "q", map[string]string{GroupConfigShareRecordLockDurationMs: "1000"}, nil, false, false); err != nil {
		t.Fatal(err)
	}
	wantError(t, c.AlterGroupConfigs(testContext(t), "q", map[string]string{"share.unknown": "1"}, nil, false, false), ErrInvalidConfig)
	wantError(t, c.AlterGroupConfigs(testContext(t), "q", map[string]string{GroupConfigShareAutoOffsetReset: "never"}, nil, false, false), ErrInvalidConfig)
	if err := c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteGroupState(testContext(t), GroupStateWrite{SharePartitions: []SharePartitionWrite{shareWrite("q", "t", 1, 7)}}); err != nil {
		t.Fatal(err)
	}
	want := c.GroupState()
	c = reopen(t, c)
	got := c.GroupState()
	if !reflect.DeepEqual(got.file(), want.file()) {
		t.Fatalf("after reopening %+v, want %+v", got.file(), want.file())
	}
}

func TestShareAutoOffsetReset(t *testing.T) {
	for value, want := range map[string]ShareAutoOffsetReset{
		"earliest":             {Earliest: true},
		"latest":               {},
		"by_duration:PT1H30M":  {ByDuration: 90 * time.Minute},
		"by_duration:P1DT0.5S": {ByDuration: 24*time.Hour + 500*time.Millisecond},
		" by_duration:pt10s":   {ByDuration: 10 * time.Second},
	} {
		got, err := ParseShareAutoOffsetReset(value)
		if err != nil || got != want {
			t.Fatalf("%q: %+v %v, want %+v", value, got, err, want)
		}
	}
	for _, bad := range []string{"", "none", "by_duration:", "by_duration:P", "by_duration:PT", "by_duration:P1H", "by_duration:PT1D", "by_duration:PT-1S", "by_duration:PT1"} {
		if _, err := ParseShareAutoOffsetReset(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%q accepted: %v", bad, err)
		}
	}
}

// TestClusterForwardsGroupState: group state changes made on a node that is not the controller go
// to the controller in one forwarded call each, are visible on that node when the call returns,
// keep their error classes, and keep working across a controller change.
func TestClusterForwardsGroupState(t *testing.T) {
	tc := startCluster(t, 3)
	controller, follower := tc.controller(), tc.follower()
	writesBefore, configsBefore := controller.servedCalls(opWriteGroupState), controller.servedCalls(opAlterGroupConfigs)
	withoutIndex := func(s *GroupState) groupStateFile {
		f := s.file()
		f.Index = 0
		return f
	}

	write := GroupStateWrite{
		Groups:          []GroupRecordWrite{{Group: "q", Record: &GroupRecord{Type: GroupTypeShare, Body: []byte{0, 1, 0xfe, 0xff}}}},
		SharePartitions: []SharePartitionWrite{shareWrite("q", "t", 0, 10), shareWrite("q", "t", 1, 20)},
	}
	if err := follower.WriteGroupState(testContext(t), write); err != nil {
		t.Fatalf("WriteGroupState on a follower: %v", err)
	}
	want := withoutIndex(emptyGroupState().withWrite(write))
	if got := withoutIndex(follower.GroupState()); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower's group state after its write: %+v, want %+v", got, want)
	}
	if got := withoutIndex(controller.GroupState()); !reflect.DeepEqual(got, want) {
		t.Fatalf("controller's group state after the follower's write: %+v, want %+v", got, want)
	}
	if err := follower.WriteGroupState(testContext(t), GroupStateWrite{}); err != nil {
		t.Fatalf("empty write: %v", err)
	}

	set := map[string]string{GroupConfigShareAutoOffsetReset: "earliest", GroupConfigShareRecordLockDurationMs: "2000"}
	if err := follower.AlterGroupConfigs(testContext(t), "q", set, nil, false, false); err != nil {
		t.Fatalf("AlterGroupConfigs on a follower: %v", err)
	}
	if got := follower.GroupState().Configs("q"); !reflect.DeepEqual(got, set) {
		t.Fatalf("follower's configs after its change: %v, want %v", got, set)
	}
	if err := follower.AlterGroupConfigs(testContext(t), "q", nil, []string{GroupConfigShareRecordLockDurationMs}, false, false); err != nil {
		t.Fatalf("removing a config on a follower: %v", err)
	}
	validateOnly := map[string]string{GroupConfigShareDeliveryCountLimit: "3"}
	if err := follower.AlterGroupConfigs(testContext(t), "q", validateOnly, nil, true, true); err != nil {
		t.Fatalf("validate-only change on a follower: %v", err)
	}
	if got := follower.GroupState().Configs("q"); !reflect.DeepEqual(got, map[string]string{GroupConfigShareAutoOffsetReset: "earliest"}) {
		t.Fatalf("follower's configs after a removal and a validate-only change: %v", got)
	}

	// Refusals keep their class, are not retried, and propose nothing.
	index := controller.GroupState().Index
	wantError(t, follower.AlterGroupConfigs(testContext(t), "q", map[string]string{GroupConfigShareAutoOffsetReset: "never"}, nil, false, false), ErrInvalidConfig)
	wantError(t, follower.AlterGroupConfigs(testContext(t), "q", map[string]string{"share.unknown": "1"}, nil, false, true), ErrInvalidConfig)
	wantError(t, follower.AlterGroupConfigs(testContext(t), "", set, nil, false, false), ErrInvalidConfig)
	err := follower.WriteGroupState(testContext(t), GroupStateWrite{Groups: []GroupRecordWrite{{Group: "g", Record: &GroupRecord{Type: "classic"}}}})
	wantError(t, err, errMalformedCommand)
	if errors.Is(err, ErrTimeout) || errors.Is(err, ErrNotLeader) {
		t.Fatalf("a malformed write was retried: %v", err)
	}
	if got := controller.GroupState().Index; got != index {
		t.Fatalf("refused changes moved the group state index from %d to %d", index, got)
	}
	if calls := controller.servedCalls(opWriteGroupState) - writesBefore; calls < 2 {
		t.Fatalf("the controller served %d forwarded group state writes, want at least 2", calls)
	}
	if calls := controller.servedCalls(opAlterGroupConfigs) - configsBefore; calls < 6 {
		t.Fatalf("the controller served %d forwarded group config changes, want at least 6", calls)
	}

	// After the controller stops, the survivors go on from the state it left.
	tc.stop(controller.NodeID())
	survivor := tc.follower()
	next := GroupStateWrite{SharePartitions: []SharePartitionWrite{shareWrite("q", "t", 0, 11)}, DeleteGroups: []string{"gone"}}
	if err := survivor.WriteGroupState(testContext(t), next); err != nil {
		t.Fatalf("WriteGroupState on a follower after failover: %v", err)
	}
	if err := survivor.AlterGroupConfigs(testContext(t), "q", map[string]string{GroupConfigShareDeliveryCountLimit: "4"}, nil, true, false); err != nil {
		t.Fatalf("AlterGroupConfigs on a follower after failover: %v", err)
	}
	state := tc.controller().GroupState()
	if got, _ := state.SharePartition("q", "t", 0); got.StartOffset != 11 {
		t.Fatalf("new controller's q t-0 start %d, want 11", got.StartOffset)
	}
	if got, _ := state.SharePartition("q", "t", 1); got.StartOffset != 20 {
		t.Fatalf("new controller lost the write made before failover: q t-1 start %d, want 20", got.StartOffset)
	}
	if got := survivor.GroupState().Configs("q"); !reflect.DeepEqual(got, map[string]string{GroupConfigShareDeliveryCountLimit: "4"}) {
		t.Fatalf("configs replaced after failover: %v", got)
	}
}

// TestClusterRefusesOversizeForward: a change too large for one forwarding frame fails at once
// with an error of no retriable class, rather than being retried until its deadline.
func TestClusterRefusesOversizeForward(t *testing.T) {
	tc := startCluster(t, 3)
	controller, follower := tc.controller(), tc.follower()
	before := controller.servedCalls(opWriteGroupState)
	body := make([]byte, maxForwardFrame*3/4+1) // base64 makes it larger than a frame
	err := follower.WriteGroupState(testContext(t), GroupStateWrite{
		Groups: []GroupRecordWrite{{Group: "big", Record: &GroupRecord{Type: GroupTypeConsumer, Body: body}}},
	})
	if err == nil || errors.Is(err, ErrTimeout) || errors.Is(err, ErrNotLeader) {
		t.Fatalf("oversize forwarded write: %v, want an error of no retriable class", err)
	}
	t.Logf("refused with: %.200s", err)
	if calls := controller.servedCalls(opWriteGroupState) - before; calls != 0 {
		t.Fatalf("the controller served %d oversize writes", calls)
	}
	if err := follower.WriteGroupState(testContext(t), GroupStateWrite{Groups: []GroupRecordWrite{{Group: "small", Record: &GroupRecord{Type: GroupTypeConsumer}}}}); err != nil {
		t.Fatalf("a small write after the oversize one: %v", err)
	}
}
