package coordinator

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// testConfig is a single-node config with Raft timings small enough for a
// node to elect itself in well under a second.
func testConfig(dataDir string) Config {
	config := DefaultConfig()
	config.NodeID = 1
	config.DataDir = dataDir
	config.RaftAddress = "127.0.0.1:0"
	config.HeartbeatTimeout = 50 * time.Millisecond
	config.ElectionTimeout = 50 * time.Millisecond
	config.LeaderLeaseTimeout = 50 * time.Millisecond
	config.CommitTimeout = 5 * time.Millisecond
	// The brokers these tests register are names at addresses nothing listens on: probing them
	// would fence them at once.
	config.BrokerProbeAfter = 0
	return config
}

// testContext bounds a test's waits generously: it is a deadlock guard, not
// a timing assertion.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openTest(t testing.TB, config Config) *Coordinator {
	t.Helper()
	c, err := Open(testContext(t), config)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openWithBrokers opens a fresh single node and registers brokers 1..count.
func openWithBrokers(t testing.TB, count int32) *Coordinator {
	t.Helper()
	c := openTest(t, testConfig(t.TempDir()))
	for id := int32(1); id <= count; id++ {
		if err := c.RegisterBroker(testContext(t), Broker{NodeID: id, Host: "127.0.0.1", Port: 9090 + id}); err != nil {
			t.Fatalf("RegisterBroker(%d): %v", id, err)
		}
	}
	return c
}

func mustCreate(t testing.TB, c *Coordinator, name string, partitions int32, replicationFactor int16, configs map[string]string) *Topic {
	t.Helper()
	topic, err := c.CreateTopic(testContext(t), name, partitions, replicationFactor, configs, false)
	if err != nil {
		t.Fatalf("CreateTopic(%q): %v", name, err)
	}
	return topic
}

func wantError(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

func TestOpenBootstrapsAndLeads(t *testing.T) {
	c := openTest(t, testConfig(t.TempDir()))
	if !c.IsLeader() {
		t.Fatal("a bootstrapped single node is not the leader after Open")
	}
	metadata := c.Metadata()
	if metadata.ControllerID != 1 {
		t.Fatalf("ControllerID %d, want 1", metadata.ControllerID)
	}
	if len(metadata.ClusterID) != 22 {
		t.Fatalf("cluster id %q is not 22 characters of base64", metadata.ClusterID)
	}
	if strings.HasSuffix(c.RaftAddress(), ":0") {
		t.Fatalf("RaftAddress %q did not resolve the ephemeral port", c.RaftAddress())
	}
	if _, err := os.Stat(filepath.Join(c.config.DataDir, "raft.db")); err != nil {
		t.Fatalf("raft log missing: %v", err)
	}
	if err := c.WaitLeader(testContext(t)); err != nil {
		t.Fatalf("WaitLeader on a leader: %v", err)
	}
}

func TestTopicLifecycle(t *testing.T) {
	c := openWithBrokers(t, 3)
	before := c.Metadata().Version
	configs := map[string]string{ConfigRetentionMs: "1000"}
	created := mustCreate(t, c, "orders", 6, 2, configs)
	configs[ConfigRetentionMs] = "changed by the caller afterwards"

	if created.ID == ([16]byte{}) {
		t.Fatal("topic id is all zeros")
	}
	metadata := c.Metadata()
	if metadata.Version <= before {
		t.Fatalf("Version %d did not grow past %d", metadata.Version, before)
	}
	topic := metadata.Topics["orders"]
	if topic == nil || topic.ID != created.ID || topic.Configs[ConfigRetentionMs] != "1000" || topic.Internal {
		t.Fatalf("described topic %+v, created %+v", topic, created)
	}
	leaders := map[int32]int{}
	for i, partition := range topic.Partitions {
		if partition.Index != int32(i) || partition.LeaderEpoch != 0 || len(partition.Replicas) != 2 ||
			partition.Leader != partition.Replicas[0] || !slices.Equal(partition.ISR, partition.Replicas) {
			t.Fatalf("partition %d: %+v", i, partition)
		}
		leaders[partition.Leader]++
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("leaders %v are not spread over brokers 1..3", leaders)
	}

	if err := c.DeleteTopic(testContext(t), "orders"); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, found := c.Metadata().Topics["orders"]; found {
		t.Fatal("deleted topic still described")
	}
	wantError(t, c.DeleteTopic(testContext(t), "orders"), ErrUnknownTopic)

	recreated := mustCreate(t, c, "orders", 1, 1, nil)
	if recreated.ID == created.ID {
		t.Fatal("a re-created topic reused the old topic id")
	}
}

func TestCreateTopicRefuses(t *testing.T) {
	c := openWithBrokers(t, 3)
	mustCreate(t, c, "exists", 1, 1, nil)
	version := c.Metadata().Version
	refuses := func(name string, partitions int32, replicationFactor int16, configs map[string]string, want error) {
		t.Helper()
		for _, validateOnly := range []bool{false, true} {
			_, err := c.CreateTopic(testContext(t), name, partitions, replicationFactor, configs, validateOnly)
			wantError(t, err, want)
		}
	}
	refuses("exists", 1, 1, nil, ErrTopicExists)
	refuses("", 1, 1, nil, ErrInvalidTopicName)
	refuses(".", 1, 1, nil, ErrInvalidTopicName)
	refuses("..", 1, 1, nil, ErrInvalidTopicName)
	refuses(strings.Repeat("x", 250), 1, 1, nil, ErrInvalidTopicName)
	refuses("a/b", 1, 1, nil, ErrInvalidTopicName)
	refuses(ConsumerOffsetsTopic, 1, 1, nil, ErrReservedTopic)
	refuses("t", 0, 1, nil, ErrInvalidPartitions)
	refuses("t", -1, 1, nil, ErrInvalidPartitions)
	refuses("t", 1, 0, nil, ErrInvalidReplicationFactor)
	refuses("t", 1, -1, nil, ErrInvalidReplicationFactor)
	refuses("t", 1, 4, nil, ErrInvalidReplicationFactor)
	refuses("t", 1, 1, map[string]string{"no.such.key": "1"}, ErrInvalidConfig)
	refuses("t", 1, 1, map[string]string{ConfigSegmentBytes: "13"}, ErrInvalidConfig)
	refuses("t", 1, 1, map[string]string{ConfigCleanupPolicy: "compress"}, ErrInvalidConfig)
	if got := c.Metadata().Version; got != version {
		t.Fatalf("refused creations changed the metadata: version %d -> %d", version, got)
	}
}

func TestCreateTopicValidateOnlyChangesNothing(t *testing.T) {
	c := openWithBrokers(t, 3)
	version := c.Metadata().Version
	topic, err := c.CreateTopic(testContext(t), "dry", 4, 3, map[string]string{ConfigRetentionBytes: "-1"}, true)
	if err != nil {
		t.Fatalf("validate-only CreateTopic: %v", err)
	}
	if len(topic.Partitions) != 4 || topic.ReplicationFactor() != 3 {
		t.Fatalf("validate-only returned %+v", topic)
	}
	if _, found := c.Metadata().Topics["dry"]; found || c.Metadata().Version != version {
		t.Fatal("validate-only CreateTopic created the topic")
	}
}

func TestReplicationFactorBoundedByBrokers(t *testing.T) {
	c := openTest(t, testConfig(t.TempDir()))
	_, err := c.CreateTopic(testContext(t), "t", 1, 1, nil, false)
	wantError(t, err, ErrInvalidReplicationFactor) // no broker registered yet
}

func TestCreatePartitions(t *testing.T) {
	c := openWithBrokers(t, 3)
	original := mustCreate(t, c, "grow", 3, 2, nil)
	wantError(t, c.CreatePartitions(testContext(t), "grow", 3, false), ErrInvalidPartitions)
	wantError(t, c.CreatePartitions(testContext(t), "grow", 2, false), ErrInvalidPartitions)
	wantError(t, c.CreatePartitions(testContext(t), "missing", 5, false), ErrUnknownTopic)

	if err := c.CreatePartitions(testContext(t), "grow", 5, true); err != nil {
		t.Fatalf("validate-only CreatePartitions: %v", err)
	}
	if got := len(c.Metadata().Topics["grow"].Partitions); got != 3 {
		t.Fatalf("validate-only CreatePartitions changed the count to %d", got)
	}

	if err := c.CreatePartitions(testContext(t), "grow", 5, false); err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	topic := c.Metadata().Topics["grow"]
	if len(topic.Partitions) != 5 || topic.ID != original.ID {
		t.Fatalf("after growing: %+v", topic)
	}
	// Leaders keep rotating: partition p leads on the broker after p-1's.
	brokerIDs := c.Metadata().BrokerIDs()
	for i, partition := range topic.Partitions {
		if i < 3 && !reflect.DeepEqual(partition, original.Partitions[i]) {
			t.Fatalf("existing partition %d changed: %+v -> %+v", i, original.Partitions[i], partition)
		}
		if i > 0 {
			previous := slices.Index(brokerIDs, topic.Partitions[i-1].Leader)
			if partition.Leader != brokerIDs[(previous+1)%len(brokerIDs)] {
				t.Fatalf("partition %d leader %d does not follow partition %d's leader %d", i, partition.Leader, i-1, topic.Partitions[i-1].Leader)
			}
		}
		if partition.Index != int32(i) || len(partition.Replicas) != 2 || !slices.Equal(partition.ISR, partition.Replicas) {
			t.Fatalf("partition %d: %+v", i, partition)
		}
	}
}

func TestAlterTopicConfigs(t *testing.T) {
	c := openWithBrokers(t, 1)
	mustCreate(t, c, "conf", 1, 1, map[string]string{ConfigRetentionMs: "1000", ConfigSegmentBytes: "1048576"})
	configsOf := func() map[string]string { return c.Metadata().Topics["conf"].Configs }
	alter := func(set map[string]string, remove []string, replaceAll, validateOnly bool) error {
		return c.AlterTopicConfigs(testContext(t), "conf", set, remove, replaceAll, validateOnly)
	}
	expect := func(want map[string]string) {
		t.Helper()
		if got := configsOf(); !maps.Equal(got, want) {
			t.Fatalf("configs %v, want %v", got, want)
		}
	}

	if err := alter(map[string]string{ConfigRetentionMs: "2000", ConfigCompressionType: "zstd"}, []string{ConfigSegmentBytes}, false, false); err != nil {
		t.Fatalf("incremental alter: %v", err)
	}
	expect(map[string]string{ConfigRetentionMs: "2000", ConfigCompressionType: "zstd"})

	version := c.Metadata().Version
	if err := alter(map[string]string{ConfigRetentionMs: "5"}, []string{ConfigCompressionType}, false, true); err != nil {
		t.Fatalf("validate-only alter: %v", err)
	}
	if err := alter(map[string]string{ConfigMaxMessageBytes: "5"}, nil, true, true); err != nil {
		t.Fatalf("validate-only replace: %v", err)
	}
	expect(map[string]string{ConfigRetentionMs: "2000", ConfigCompressionType: "zstd"})
	if c.Metadata().Version != version {
		t.Fatal("validate-only alters changed the metadata")
	}

	if err := alter(map[string]string{ConfigMaxMessageBytes: "4096"}, nil, true, false); err != nil {
		t.Fatalf("replace-all alter: %v", err)
	}
	expect(map[string]string{ConfigMaxMessageBytes: "4096"})

	if err := alter(nil, []string{ConfigMaxMessageBytes}, false, false); err != nil {
		t.Fatalf("remove the last override: %v", err)
	}
	expect(nil)

	wantError(t, alter(map[string]string{"no.such.key": "1"}, nil, false, false), ErrInvalidConfig)
	wantError(t, alter(map[string]string{ConfigMinInsyncReplicas: "0"}, nil, false, false), ErrInvalidConfig)
	wantError(t, alter(map[string]string{ConfigCleanupPolicy: "compress"}, nil, true, false), ErrInvalidConfig)
	wantError(t, alter(nil, []string{"no.such.key"}, false, false), ErrInvalidConfig)
	wantError(t, alter(map[string]string{ConfigFlushMs: "1"}, []string{ConfigFlushMs}, false, false), ErrInvalidConfig)
	wantError(t, c.AlterTopicConfigs(testContext(t), "missing", nil, nil, false, false), ErrUnknownTopic)
	expect(nil)
}

func TestRegisterBroker(t *testing.T) {
	c := openTest(t, testConfig(t.TempDir()))
	broker := Broker{NodeID: 1, Host: "localhost", Port: 9092, Rack: "a"}
	if err := c.RegisterBroker(testContext(t), broker); err != nil {
		t.Fatal(err)
	}
	version := c.Metadata().Version
	if err := c.RegisterBroker(testContext(t), broker); err != nil {
		t.Fatal(err)
	}
	if c.Metadata().Version != version {
		t.Fatal("re-registering an identical broker changed the metadata")
	}
	broker.Port = 9093
	if err := c.RegisterBroker(testContext(t), broker); err != nil {
		t.Fatal(err)
	}
	if got := c.Metadata().Brokers[1]; got != broker {
		t.Fatalf("registered %+v, described %+v", broker, got)
	}
	for _, invalid := range []Broker{{NodeID: -1, Host: "h", Port: 1}, {NodeID: 1, Port: 1}, {NodeID: 1, Host: "h"}, {NodeID: 1, Host: "h", Port: 65536}} {
		wantError(t, c.RegisterBroker(testContext(t), invalid), ErrInvalidBroker)
	}
}

// delivery is one Subscribe callback.
type delivery struct{ old, new *Metadata }

func TestSubscribeSeesChangesInOrder(t *testing.T) {
	c := openWithBrokers(t, 1)
	mustCreate(t, c, "existing", 1, 1, nil)

	deliveries := make(chan delivery, 64)
	cancel := c.Subscribe(func(old, new *Metadata) { deliveries <- delivery{old, new} })
	defer cancel()

	mustCreate(t, c, "a", 1, 1, nil)
	mustCreate(t, c, "b", 2, 1, nil)
	if err := c.DeleteTopic(testContext(t), "existing"); err != nil {
		t.Fatal(err)
	}
	final := c.Metadata()

	// Await the delivery of the final state, checking the chain on the way.
	var previous *Metadata
	for first := true; previous != final; first = false {
		var got delivery
		select {
		case got = <-deliveries:
		case <-testContext(t).Done():
			t.Fatal("the final state was never delivered")
		}
		if first {
			if got.old.Version != 0 || len(got.old.Topics) != 0 || len(got.old.Brokers) != 0 {
				t.Fatalf("first delivery's old is %+v, want an empty cluster", got.old)
			}
			if _, found := got.new.Topics["existing"]; !found {
				t.Fatal("first delivery does not hold the topic created before Subscribe")
			}
		} else if got.old != previous {
			t.Fatal("a delivery's old is not the previous delivery's new")
		}
		if got.new.Version < got.old.Version {
			t.Fatalf("Version went backwards: %d -> %d", got.old.Version, got.new.Version)
		}
		previous = got.new
	}
	if names := final.TopicNames(); !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("final topics %v", names)
	}

	// After cancel returns, no more calls: a second subscriber proves a later
	// change was published.
	cancel()
	witness := make(chan *Metadata, 64)
	cancelWitness := c.Subscribe(func(_, new *Metadata) { witness <- new })
	defer cancelWitness()
	mustCreate(t, c, "after-cancel", 1, 1, nil)
	for seen := false; !seen; {
		select {
		case m := <-witness:
			_, seen = m.Topics["after-cancel"]
		case <-testContext(t).Done():
			t.Fatal("witness never saw the change")
		}
	}
	select {
	case got := <-deliveries:
		t.Fatalf("cancelled subscriber was called with version %d", got.new.Version)
	default:
	}
}

// clusterState is what must survive a restart.
type clusterState struct {
	ClusterID string
	Brokers   map[int32]Broker
	Topics    map[string]Topic
}

func stateOf(m *Metadata) clusterState {
	state := clusterState{ClusterID: m.ClusterID, Brokers: maps.Clone(m.Brokers), Topics: map[string]Topic{}}
	for name, topic := range m.Topics {
		state.Topics[name] = *topic
	}
	return state
}

// populate makes changes of every kind.
func populate(t *testing.T, c *Coordinator, prefix string) {
	t.Helper()
	for id := int32(1); id <= 2; id++ {
		if err := c.RegisterBroker(testContext(t), Broker{NodeID: id, Host: "127.0.0.1", Port: 9090 + id}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, c, prefix+"kept", 3, 2, map[string]string{ConfigRetentionMs: "60000"})
	mustCreate(t, c, prefix+"deleted", 1, 1, nil)
	if err := c.DeleteTopic(testContext(t), prefix+"deleted"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreatePartitions(testContext(t), prefix+"kept", 4, false); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterTopicConfigs(testContext(t), prefix+"kept", map[string]string{ConfigSegmentBytes: "1048576"}, nil, false, false); err != nil {
		t.Fatal(err)
	}
}

// reopen closes c and opens its data dir again.
func reopen(t *testing.T, c *Coordinator) *Coordinator {
	t.Helper()
	config := c.config
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openTest(t, config)
}

func TestReopenReplaysLog(t *testing.T) {
	c := openTest(t, testConfig(t.TempDir()))
	populate(t, c, "")
	want := stateOf(c.Metadata())

	c = reopen(t, c)
	if got := stateOf(c.Metadata()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopening:\n%+v\nwant\n%+v", got, want)
	}
	if !c.IsLeader() {
		t.Fatal("the reopened node is not the leader")
	}
	// The node came back on another ephemeral port and can still commit.
	mustCreate(t, c, "after-reopen", 1, 1, nil)
	c = reopen(t, c)
	if _, found := c.Metadata().Topics["after-reopen"]; !found {
		t.Fatal("a topic created after the first reopen was lost")
	}
}

func TestReopenRestoresSnapshot(t *testing.T) {
	config := testConfig(t.TempDir())
	config.TrailingLogs = 0 // the snapshot must carry the state: no log left behind it
	c := openTest(t, config)
	populate(t, c, "snap-")
	if err := c.Snapshot(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	snapshots, err := os.ReadDir(filepath.Join(config.DataDir, "snapshots"))
	if err != nil || len(snapshots) == 0 {
		t.Fatalf("no snapshot written: %v %v", snapshots, err)
	}
	// Changes after the snapshot replay from the log on top of it.
	mustCreate(t, c, "after-snapshot", 2, 1, nil)
	want := stateOf(c.Metadata())

	c = reopen(t, c)
	if got := stateOf(c.Metadata()); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restoring:\n%+v\nwant\n%+v", got, want)
	}
	mustCreate(t, c, "after-restore", 1, 1, nil)
}

func TestNotLeader(t *testing.T) {
	config := testConfig(t.TempDir())
	config.Bootstrap = false
	c := openTest(t, config) // no state, no bootstrap: returns at once
	if c.IsLeader() {
		t.Fatal("a node with no configuration claims leadership")
	}
	// Changes wait for a controller within ctx, then report both classes.
	shortContext := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	_, err := c.CreateTopic(shortContext(), "t", 1, 1, nil, false)
	wantError(t, err, ErrNotLeader)
	wantError(t, err, ErrTimeout)
	wantError(t, c.RegisterBroker(shortContext(), Broker{NodeID: 1, Host: "h", Port: 1}), ErrNotLeader)
	wantError(t, c.DeleteTopic(shortContext(), "t"), ErrNotLeader)
	wantError(t, c.WaitLeader(shortContext()), ErrTimeout)
}

func TestClosed(t *testing.T) {
	c := openWithBrokers(t, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := c.CreateTopic(testContext(t), "t", 1, 1, nil, false)
	wantError(t, err, ErrClosed)
	wantError(t, c.WaitLeader(testContext(t)), ErrClosed)
	if c.IsLeader() {
		t.Fatal("a closed node claims leadership")
	}
}

func TestDataDirIsLocked(t *testing.T) {
	c := openTest(t, testConfig(t.TempDir()))
	if second, err := Open(testContext(t), c.config); err == nil {
		second.Close()
		t.Fatal("a second Open of a data dir in use succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	valid := testConfig(t.TempDir())
	if err := valid.Validate(); err != nil {
		t.Fatal(err)
	}
	refuses := func(change func(*Config)) {
		t.Helper()
		config := valid
		change(&config)
		if err := config.Validate(); err == nil {
			t.Fatalf("accepted %+v", config)
		}
	}
	refuses(func(c *Config) { c.NodeID = -1 })
	refuses(func(c *Config) { c.DataDir = "" })
	refuses(func(c *Config) { c.RaftAddress = "no-port" })
	refuses(func(c *Config) { c.ApplyTimeout = 0 })
	refuses(func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout })
	refuses(func(c *Config) { c.SnapshotsRetained = 0 })
	refuses(func(c *Config) { c.SnapshotThreshold = 0 })
	defaults := DefaultConfig()
	defaults.DataDir = t.TempDir()
	if err := defaults.Validate(); err != nil {
		t.Fatalf("DefaultConfig with a DataDir is invalid: %v", err)
	}
}

func TestOpenGivesUpWhenContextEnds(t *testing.T) {
	config := testConfig(t.TempDir())
	config.HeartbeatTimeout = time.Minute // no election before ctx ends
	config.ElectionTimeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if c, err := Open(ctx, config); !errors.Is(err, ErrTimeout) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Open: %v, want ErrTimeout", err)
	}
	// Everything was released: the same data dir opens again.
	c := openTest(t, testConfig(config.DataDir))
	if !c.IsLeader() {
		t.Fatal("reopened node is not the leader")
	}
}

func TestSubscribeAfterClose(t *testing.T) {
	c := openTest(t, testConfig(t.TempDir()))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cancel := c.Subscribe(func(_, _ *Metadata) { t.Error("callback ran after Close") })
	cancel()
}
