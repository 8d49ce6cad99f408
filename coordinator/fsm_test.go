package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// memorySink is a raft.SnapshotSink backed by a buffer.
type memorySink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memorySink) ID() string    { return "memory" }
func (s *memorySink) Close() error  { return nil }
func (s *memorySink) Cancel() error { s.cancelled = true; return nil }

// applyAt feeds one command to f as the entry at index.
func applyAt(t testing.TB, f *fsm, index uint64, c command) applyResult {
	t.Helper()
	entry, err := encodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	result, ok := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: entry}).(applyResult)
	if !ok {
		t.Fatalf("Apply returned %T", result)
	}
	return result
}

// snapshotBytes persists f's state.
func snapshotBytes(t testing.TB, f *fsm) []byte {
	t.Helper()
	snapshot, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memorySink
	if err := snapshot.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

func discardPublish(*Metadata) {}

// randomCommand proposes what a leader might: mostly valid changes against
// state, sometimes stale or conflicting ones.
func randomCommand(random *rand.Rand, state *Metadata) command {
	names := []string{"a", "b", "c", "d"}
	name := names[random.IntN(len(names))]
	reference := topicReference{Name: name}
	if topic, found := state.Topics[name]; found && random.IntN(4) > 0 {
		reference.ID = topic.ID
	}
	switch random.IntN(7) {
	case 0:
		return &registerBrokerCommand{Broker: Broker{NodeID: int32(random.IntN(4)), Host: "h", Port: int32(9092 + random.IntN(2))}}
	case 1:
		return &initClusterCommand{ClusterID: fmt.Sprintf("cluster-%d", random.IntN(3))}
	case 2:
		count := int32(1 + random.IntN(3))
		assignments, _ := AssignReplicas([]int32{0, 1, 2}, 0, count, 1+random.IntN(3), random.IntN(3))
		return &createTopicCommand{Topic: &Topic{Name: name, ID: newTopicID(), Partitions: newPartitions(0, assignments)}}
	case 3:
		return &deleteTopicCommand{reference}
	case 4:
		first := int32(random.IntN(4))
		assignments, _ := AssignReplicas([]int32{0, 1, 2}, first, 1+int32(random.IntN(2)), 1, 0)
		return &createPartitionsCommand{topicReference: reference, Partitions: newPartitions(first, assignments)}
	case 5:
		keys := TopicConfigKeys()
		return &alterTopicConfigsCommand{
			topicReference: reference,
			Set:            map[string]string{keys[random.IntN(len(keys))]: fmt.Sprint(random.IntN(100))},
			Remove:         []string{keys[random.IntN(len(keys))]},
			ReplaceAll:     random.IntN(3) == 0,
		}
	default:
		return &noopCommand{}
	}
}

// TestFSMSnapshotRestoreRoundTrip applies random command sequences and checks
// after each step that a snapshot restores to an equal state and that equal
// states snapshot to equal bytes.
func TestFSMSnapshotRestoreRoundTrip(t *testing.T) {
	for seed := range uint64(20) {
		random := rand.New(rand.NewPCG(seed, 1))
		f := newFSM(discardPublish, nil)
		for index := uint64(1); index <= 60; index++ {
			before := f.state.Load()
			applyAt(t, f, index, randomCommand(random, before))
			after := f.state.Load()
			if after != before && after.Version != index {
				t.Fatalf("seed %d: state changed at index %d but Version is %d", seed, index, after.Version)
			}
			checkTopicInvariants(t, after)

			encoded := snapshotBytes(t, f)
			restored := newFSM(discardPublish, nil)
			if err := restored.Restore(io.NopCloser(bytes.NewReader(encoded))); err != nil {
				t.Fatalf("seed %d index %d: restore: %v", seed, index, err)
			}
			if !reflect.DeepEqual(normalized(after), normalized(restored.state.Load())) {
				t.Fatalf("seed %d index %d: restored\n%+v\nwant\n%+v", seed, index, restored.state.Load(), after)
			}
			if again := snapshotBytes(t, restored); !bytes.Equal(again, encoded) {
				t.Fatalf("seed %d index %d: snapshot of the restored state differs:\n%s\n%s", seed, index, again, encoded)
			}
		}
	}
}

// normalized maps empty maps to nil so DeepEqual compares contents.
func normalized(m *Metadata) Metadata {
	copied := *m
	if len(copied.Brokers) == 0 {
		copied.Brokers = nil
	}
	if len(copied.Topics) == 0 {
		copied.Topics = nil
	}
	return copied
}

func checkTopicInvariants(t *testing.T, m *Metadata) {
	t.Helper()
	for name, topic := range m.Topics {
		if topic.Name != name {
			t.Fatalf("topic %q stored under %q", topic.Name, name)
		}
		for i, partition := range topic.Partitions {
			if partition.Index != int32(i) {
				t.Fatalf("topic %q: Partitions[%d].Index = %d", name, i, partition.Index)
			}
		}
	}
}

// TestFSMAppliesWithoutMutatingOldStates checks copy-on-write: a state once
// published never changes.
func TestFSMAppliesWithoutMutatingOldStates(t *testing.T) {
	random := rand.New(rand.NewPCG(7, 7))
	f := newFSM(discardPublish, nil)
	var states []*Metadata
	var encodings [][]byte
	for index := uint64(1); index <= 200; index++ {
		applyAt(t, f, index, randomCommand(random, f.state.Load()))
		states = append(states, f.state.Load())
		encodings = append(encodings, snapshotBytes(t, f))
	}
	for i, state := range states {
		frozen := newFSM(discardPublish, nil)
		frozen.state.Store(state)
		frozen.setApplied(uint64(i + 1))
		if again := snapshotBytes(t, frozen); !bytes.Equal(again, encodings[i]) {
			t.Fatalf("state %d changed after later applies", i)
		}
	}
}

func TestFSMRefusesConflicts(t *testing.T) {
	f := newFSM(discardPublish, nil)
	topic := &Topic{Name: "t", ID: newTopicID(), Partitions: newPartitions(0, [][]int32{{1}})}
	if result := applyAt(t, f, 1, &createTopicCommand{Topic: topic}); result.err != nil {
		t.Fatal(result.err)
	}
	again := &Topic{Name: "t", ID: newTopicID(), Partitions: newPartitions(0, [][]int32{{1}})}
	if result := applyAt(t, f, 2, &createTopicCommand{Topic: again}); !errors.Is(result.err, ErrTopicExists) {
		t.Fatalf("second create: %v", result.err)
	}
	stale := topicReference{Name: "t", ID: newTopicID()}
	if result := applyAt(t, f, 3, &deleteTopicCommand{stale}); !errors.Is(result.err, ErrUnknownTopic) {
		t.Fatalf("delete with another topic's id: %v", result.err)
	}
	current := topicReference{Name: "t", ID: topic.ID}
	late := &createPartitionsCommand{topicReference: current, Partitions: newPartitions(3, [][]int32{{1}})}
	if result := applyAt(t, f, 4, late); !errors.Is(result.err, ErrInvalidPartitions) {
		t.Fatalf("partitions proposed for another count: %v", result.err)
	}
	if f.state.Load().Version != 1 {
		t.Fatalf("refused commands changed the state: version %d", f.state.Load().Version)
	}
	if result := applyAt(t, f, 5, &initClusterCommand{ClusterID: "first"}); result.err != nil {
		t.Fatal(result.err)
	}
	applyAt(t, f, 6, &initClusterCommand{ClusterID: "second"})
	if got := f.state.Load().ClusterID; got != "first" {
		t.Fatalf("cluster id %q, want the first one to stay", got)
	}
}

func TestFSMPanicsOnUnknownCommand(t *testing.T) {
	f := newFSM(discardPublish, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("an unknown command type was skipped")
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{200, '{', '}'}})
}

func TestFSMRejectsMalformedCommand(t *testing.T) {
	f := newFSM(discardPublish, nil)
	result := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{byte(commandCreateTopic), '{'}}).(applyResult)
	if !errors.Is(result.err, errMalformedCommand) {
		t.Fatalf("got %v, want errMalformedCommand", result.err)
	}
}

// FuzzDecodeCommand checks that decoding and applying arbitrary entries never
// panics, except for the deliberate unknown-type panic.
func FuzzDecodeCommand(f *testing.F) {
	seeds := []command{
		&noopCommand{},
		&initClusterCommand{ClusterID: "x"},
		&registerBrokerCommand{Broker: Broker{NodeID: 1, Host: "h", Port: 1}},
		&createTopicCommand{Topic: &Topic{Name: "t", Partitions: newPartitions(0, [][]int32{{1}})}},
		&deleteTopicCommand{topicReference{Name: "t"}},
		&createPartitionsCommand{topicReference: topicReference{Name: "t"}, Partitions: newPartitions(1, [][]int32{{1}})},
		&alterTopicConfigsCommand{topicReference: topicReference{Name: "t"}, Set: map[string]string{"a": "b"}, Remove: []string{"c"}},
	}
	for _, seed := range seeds {
		entry, err := encodeCommand(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(entry)
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		c, err := decodeCommand(entry)
		if err != nil {
			return
		}
		state := emptyMetadata().withTopic("t", &Topic{Name: "t", Partitions: newPartitions(0, [][]int32{{1}})})
		c.apply(state)
		reencoded, err := encodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeCommand(reencoded); err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
	})
}
