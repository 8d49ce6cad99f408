package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestFSMAllocatesDisjointProducerIDBlocks(t *testing.T) {
	f := newFSM(discardPublish, nil)
	versionBefore := f.state.Load().Version
	next := int64(0)
	for index, count := range []int64{1000, 1, 1000, MaxProducerIDBlock, 7} {
		result := applyAt(t, f, uint64(index+1), &allocateProducerIDsCommand{Broker: int32(index % 2), Count: count})
		if result.err != nil {
			t.Fatalf("block %d: %v", index, result.err)
		}
		if want := (ProducerIDBlock{First: next, Count: count}); result.producerIDs != want {
			t.Fatalf("block %d is %+v, want %+v", index, result.producerIDs, want)
		}
		next += count
		if got := f.nextProducerID.Load(); got != next {
			t.Fatalf("after block %d the next free id is %d, want %d", index, got, next)
		}
	}
	if f.state.Load().Version != versionBefore {
		t.Fatal("reserving producer ids bumped the metadata version")
	}
	// Malformed counts change nothing and fail the same way on every node.
	for _, count := range []int64{0, -1, MaxProducerIDBlock + 1} {
		result := applyAt(t, f, 10, &allocateProducerIDsCommand{Count: count})
		if !errors.Is(result.err, errMalformedCommand) || f.nextProducerID.Load() != next {
			t.Fatalf("count %d: error %v, next %d (want %d)", count, result.err, f.nextProducerID.Load(), next)
		}
	}
	// The id space ends below MaxInt64; the last block may end exactly there.
	f.nextProducerID.Store(math.MaxInt64 - 10)
	if result := applyAt(t, f, 11, &allocateProducerIDsCommand{Count: 11}); !errors.Is(result.err, ErrProducerIDsExhausted) {
		t.Fatalf("overflowing block: %v", result.err)
	}
	if result := applyAt(t, f, 12, &allocateProducerIDsCommand{Count: 10}); result.err != nil || result.producerIDs.End() != math.MaxInt64 {
		t.Fatalf("last block: %+v %v", result.producerIDs, result.err)
	}
}

func TestFSMSnapshotCarriesNextProducerID(t *testing.T) {
	f := newFSM(discardPublish, nil)
	applyAt(t, f, 1, &initClusterCommand{ClusterID: "c"})
	applyAt(t, f, 2, &allocateProducerIDsCommand{Count: 1000})
	applyAt(t, f, 3, &commitOffsetsCommand{Commits: []OffsetCommit{commitOf("g", "t", 0, 1)}})
	data := snapshotBytes(t, f)
	if !strings.Contains(string(data), fmt.Sprintf(`"format":%d`, snapshotFormat)) || !strings.Contains(string(data), `"nextProducerID":1000`) {
		t.Fatalf("snapshot lacks the current format or the next producer id: %s", data)
	}
	restored := newFSM(discardPublish, nil)
	if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if got := restored.nextProducerID.Load(); got != 1000 {
		t.Fatalf("restored next producer id %d, want 1000", got)
	}
	if again := snapshotBytes(t, restored); !bytes.Equal(again, data) {
		t.Fatalf("equal states, different snapshots:\n%s\n%s", data, again)
	}
	if result := applyAt(t, restored, 4, &allocateProducerIDsCommand{Count: 5}); result.producerIDs.First != 1000 {
		t.Fatalf("block after restore starts at %d, want 1000", result.producerIDs.First)
	}
	// Older formats restore with no ids reserved; unknown formats and negative ids are refused.
	for _, old := range []string{
		`{"format":1,"version":1,"clusterID":"c","brokers":[],"topics":[]}`,
		`{"format":2,"version":1,"clusterID":"c","brokers":[],"topics":[],"offsetsIndex":3,"offsets":[]}`,
	} {
		if err := restored.Restore(nopCloser{bytes.NewReader([]byte(old))}); err != nil {
			t.Fatalf("%s: %v", old, err)
		}
		if restored.nextProducerID.Load() != 0 || restored.state.Load().ClusterID != "c" {
			t.Fatalf("%s restored wrongly", old)
		}
	}
	for _, bad := range []string{
		fmt.Sprintf(`{"format":%d,"version":1,"clusterID":"c"}`, snapshotFormat+1),
		`{"format":3,"version":1,"clusterID":"c","nextProducerID":-5}`,
	} {
		if err := restored.Restore(nopCloser{bytes.NewReader([]byte(bad))}); err == nil {
			t.Fatalf("%s restored", bad)
		}
	}
}

// TestAllocateProducerIDsSurvivesReopen reserves blocks through Raft and checks that no id is
// reserved twice across a reopen from the log and from a snapshot.
func TestAllocateProducerIDsSurvivesReopen(t *testing.T) {
	config := testConfig(t.TempDir())
	config.TrailingLogs = 0
	c := openTest(t, config)
	allocate := func(count int64) ProducerIDBlock {
		t.Helper()
		block, err := c.AllocateProducerIDs(testContext(t), 1, count)
		if err != nil {
			t.Fatalf("AllocateProducerIDs(%d): %v", count, err)
		}
		return block
	}
	end := int64(0)
	check := func(block ProducerIDBlock, count int64) {
		t.Helper()
		if block.First != end || block.Count != count || c.NextProducerID() != block.End() {
			t.Fatalf("block %+v (next %d), want %d ids from %d", block, c.NextProducerID(), count, end)
		}
		end = block.End()
	}
	check(allocate(1000), 1000)
	check(allocate(1000), 1000)
	metadataVersion := c.Metadata().Version
	check(allocate(1), 1)
	if c.Metadata().Version != metadataVersion {
		t.Fatal("reserving producer ids bumped the metadata version")
	}
	c = reopen(t, c)
	if c.NextProducerID() != end {
		t.Fatalf("after a reopen from the log the next id is %d, want %d", c.NextProducerID(), end)
	}
	check(allocate(500), 500)
	if err := c.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c = reopen(t, c)
	if c.NextProducerID() != end {
		t.Fatalf("after a reopen from a snapshot the next id is %d, want %d", c.NextProducerID(), end)
	}
	check(allocate(1000), 1000)
	if _, err := c.AllocateProducerIDs(testContext(t), 1, 0); err == nil {
		t.Fatal("a block of 0 ids was reserved")
	}
	c.Close()
	if _, err := c.AllocateProducerIDs(testContext(t), 1, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("allocate after close: %v", err)
	}
}
