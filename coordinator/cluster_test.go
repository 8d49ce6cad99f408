package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testCluster runs several Coordinators over real TCP on 127.0.0.1, each
// with its own data dir, in one test process.
type testCluster struct {
	t       testing.TB
	voters  []Voter
	adjust  func(*Config) // applied to every node's config; nil for none
	mu      sync.Mutex
	nodes   map[int32]*Coordinator
	configs map[int32]Config
}

// clusterConfig is a node's config with the production Raft timings (which
// the failover figures are about) and short liveness timings.
func clusterConfig(t testing.TB, nodeID int32, dataDir string, voters []Voter) Config {
	config := DefaultConfig()
	config.NodeID = nodeID
	config.DataDir = dataDir
	config.RaftAddress = "127.0.0.1:0"
	config.Voters = voters
	return config
}

// listen binds an ephemeral port on 127.0.0.1.
func listen(t testing.TB, address string) net.Listener {
	t.Helper()
	listener, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatalf("listen on %s: %v", address, err)
	}
	return listener
}

// startCluster opens voterCount voters (node ids 1..voterCount) at once and
// waits until every one has caught up with a controller.
func startCluster(t testing.TB, voterCount int) *testCluster {
	t.Helper()
	return startClusterWith(t, voterCount, nil)
}

// startClusterWith is startCluster with adjust applied to the config of
// every node the cluster opens (voters now, others with nodeConfig).
func startClusterWith(t testing.TB, voterCount int, adjust func(*Config)) *testCluster {
	t.Helper()
	cluster := &testCluster{t: t, adjust: adjust, nodes: map[int32]*Coordinator{}, configs: map[int32]Config{}}
	listeners := map[int32]net.Listener{}
	for id := int32(1); id <= int32(voterCount); id++ {
		listeners[id] = listen(t, "127.0.0.1:0")
		cluster.voters = append(cluster.voters, Voter{NodeID: id, RaftAddress: listeners[id].Addr().String()})
	}
	var wait sync.WaitGroup
	errs := make(chan error, voterCount)
	for id, listener := range listeners {
		config := cluster.nodeConfig(id)
		cluster.configs[id] = config
		config.Listener = listener
		wait.Add(1)
		go func() {
			defer wait.Done()
			errs <- cluster.open(config)
		}()
	}
	wait.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(cluster.closeAll)
	return cluster
}

// nodeConfig is the config of a node of this cluster with a fresh data dir:
// a voter when id is in the voter set, otherwise a node that joins as a
// non-voter.
func (tc *testCluster) nodeConfig(id int32) Config {
	config := clusterConfig(tc.t, id, tc.t.TempDir(), tc.voters)
	if tc.adjust != nil {
		tc.adjust(&config)
	}
	return config
}

// open opens one node and records it.
func (tc *testCluster) open(config Config) error {
	c, err := Open(testContext(tc.t), config)
	if err != nil {
		return fmt.Errorf("open node %d: %w", config.NodeID, err)
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.nodes[config.NodeID] = c
	config.Listener = nil
	tc.configs[config.NodeID] = config
	return nil
}

func (tc *testCluster) node(id int32) *Coordinator {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.nodes[id]
}

// stop closes one node (a crash as far as the others can tell: no
// leadership transfer, no goodbye).
func (tc *testCluster) stop(id int32) {
	tc.t.Helper()
	tc.mu.Lock()
	c := tc.nodes[id]
	delete(tc.nodes, id)
	tc.mu.Unlock()
	if err := c.Close(); err != nil {
		tc.t.Fatalf("close node %d: %v", id, err)
	}
}

// restart opens a stopped node's data dir again; a voter on its old
// address, a non-voter on a new ephemeral port.
func (tc *testCluster) restart(id int32) *Coordinator {
	tc.t.Helper()
	config := tc.configs[id]
	if own, isVoter := config.ownVoter(); isVoter {
		config.Listener = listen(tc.t, own.RaftAddress)
	}
	if err := tc.open(config); err != nil {
		tc.t.Fatal(err)
	}
	return tc.node(id)
}

func (tc *testCluster) closeAll() {
	tc.mu.Lock()
	nodes := tc.nodes
	tc.nodes = map[int32]*Coordinator{}
	tc.mu.Unlock()
	for _, c := range nodes {
		c.Close()
	}
}

// controller waits until every running node names the same caught-up
// controller and returns it.
func (tc *testCluster) controller() *Coordinator {
	tc.t.Helper()
	var leader *Coordinator
	awaitCondition(tc.t, "one controller named by every node", func() bool {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		leader = nil
		for _, c := range tc.nodes {
			if c.IsLeader() {
				leader = c
			}
		}
		if leader == nil {
			return false
		}
		for _, c := range tc.nodes {
			if c.Metadata().ControllerID != leader.NodeID() {
				return false
			}
		}
		return true
	})
	return leader
}

// follower returns a running node that is not the controller.
func (tc *testCluster) follower() *Coordinator {
	tc.t.Helper()
	controller := tc.controller()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, c := range tc.nodes {
		if c != controller {
			return c
		}
	}
	tc.t.Fatal("no follower running")
	return nil
}

// awaitCondition polls condition until it holds, failing the test after the
// test context's deadline (a deadlock guard, not a timing assertion).
func awaitCondition(t testing.TB, what string, condition func() bool) {
	t.Helper()
	ctx := testContext(t)
	for !condition() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// awaitMetadata waits until c publishes a snapshot for which condition
// holds.
func awaitMetadata(t testing.TB, c *Coordinator, what string, condition func(*Metadata) bool) *Metadata {
	t.Helper()
	if err := c.view.waitFor(testContext(t), c.stop, condition); err != nil {
		t.Fatalf("node %d: waiting for %s: %v (metadata %+v)", c.NodeID(), what, err, c.Metadata())
	}
	return c.Metadata()
}

// registerWithSessions registers every node's broker and starts the heartbeat sessions of brokers
// 1 to last.
func registerWithSessions(t testing.TB, tc *testCluster, last int32) {
	t.Helper()
	registerAll(t, tc)
	for id := int32(1); id <= last; id++ {
		c := tc.node(id)
		c.StartSession(c.Metadata().Brokers[id])
	}
}

func registerAll(t testing.TB, tc *testCluster) {
	t.Helper()
	tc.mu.Lock()
	nodes := make([]*Coordinator, 0, len(tc.nodes))
	for _, c := range tc.nodes {
		nodes = append(nodes, c)
	}
	tc.mu.Unlock()
	for _, c := range nodes {
		// Each broker's address is its node's Raft port: something that listens exactly while the
		// node runs, as a broker's listener does (the controller probes it, liveness_probe.go).
		host, port, err := net.SplitHostPort(c.RaftAddress())
		if err != nil {
			t.Fatal(err)
		}
		portNumber, err := strconv.Atoi(port)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RegisterBroker(testContext(t), Broker{NodeID: c.NodeID(), Host: host, Port: int32(portNumber)}); err != nil {
			t.Fatalf("node %d registers: %v", c.NodeID(), err)
		}
	}
}

func TestClusterFormsAndForwards(t *testing.T) {
	tc := startCluster(t, 3)
	controller := tc.controller()
	clusterID := controller.Metadata().ClusterID
	for id := int32(1); id <= 3; id++ {
		c := tc.node(id)
		if got := c.Metadata().ClusterID; got != clusterID || len(got) != 22 {
			t.Fatalf("node %d has cluster id %q, the controller %q", id, got, clusterID)
		}
		recorded, err := readClusterIDFile(c.config.DataDir)
		if err != nil || recorded != clusterID {
			t.Fatalf("node %d recorded cluster id %q (%v), want %q", id, recorded, err, clusterID)
		}
	}

	registerAll(t, tc) // two of the three registrations are forwarded
	follower := tc.follower()
	awaitMetadata(t, follower, "three brokers", func(m *Metadata) bool { return len(m.Brokers) == 3 })
	topic, err := follower.CreateTopic(testContext(t), "forwarded", 3, 3, map[string]string{ConfigRetentionMs: "1000"}, false)
	if err != nil {
		t.Fatalf("CreateTopic on a follower: %v", err)
	}
	// Read-your-writes: the follower's own metadata holds the topic when the call returns.
	if local := follower.Metadata().Topics["forwarded"]; local == nil || local.ID != topic.ID || len(local.Partitions) != 3 {
		t.Fatalf("follower's metadata after its CreateTopic: %+v, created %+v", local, topic)
	}
	if err := follower.CreatePartitions(testContext(t), "forwarded", 4, false); err != nil {
		t.Fatalf("CreatePartitions on a follower: %v", err)
	}
	if err := follower.AlterTopicConfigs(testContext(t), "forwarded", map[string]string{ConfigRetentionMs: "2000"}, nil, false, false); err != nil {
		t.Fatalf("AlterTopicConfigs on a follower: %v", err)
	}
	if got := follower.Metadata().Topics["forwarded"]; len(got.Partitions) != 4 || got.Configs[ConfigRetentionMs] != "2000" {
		t.Fatalf("follower's topic after its changes: %+v", got)
	}

	// Error classes survive the trip.
	_, err = follower.CreateTopic(testContext(t), "forwarded", 1, 1, nil, false)
	wantError(t, err, ErrTopicExists)
	_, err = follower.CreateTopic(testContext(t), "bad", 1, 1, map[string]string{"no.such.key": "1"}, false)
	wantError(t, err, ErrInvalidConfig)
	_, err = follower.CreateTopic(testContext(t), "big", 1, 4, nil, false)
	wantError(t, err, ErrInvalidReplicationFactor)
	_, err = follower.CreateTopic(testContext(t), "a/b", 1, 1, nil, false)
	wantError(t, err, ErrInvalidTopicName)
	wantError(t, follower.DeleteTopic(testContext(t), "missing"), ErrUnknownTopic)
	wantError(t, follower.RegisterBroker(testContext(t), Broker{NodeID: 9}), ErrInvalidBroker)
	_, err = follower.AllocateProducerIDs(testContext(t), 1, 0)
	wantError(t, err, errMalformedCommand)

	// Producer ids and offsets from a follower.
	first, err := follower.AllocateProducerIDs(testContext(t), follower.NodeID(), 100)
	if err != nil {
		t.Fatalf("AllocateProducerIDs on a follower: %v", err)
	}
	second, err := controller.AllocateProducerIDs(testContext(t), controller.NodeID(), 100)
	if err != nil || second.First < first.End() {
		t.Fatalf("blocks %+v and %+v overlap (%v)", first, second, err)
	}
	if follower.NextProducerID() < first.End() {
		t.Fatalf("follower's next producer id %d is below its own block %+v", follower.NextProducerID(), first)
	}
	commitSync(t, follower, commitOf("g", "forwarded", 0, 42))
	if got, ok := follower.Offsets().Lookup("g", "forwarded", 0); !ok || got.Offset != 42 {
		t.Fatalf("follower's offsets after its commit: %+v %v", got, ok)
	}
	if err := follower.DeletePartitionOffsets(testContext(t), "g", []TopicPartition{{Topic: "forwarded", Partition: 0}}); err != nil {
		t.Fatalf("DeletePartitionOffsets on a follower: %v", err)
	}
	commitSync(t, follower, commitOf("h", "forwarded", 1, 7))
	if err := follower.DeleteGroupOffsets(testContext(t), []string{"h"}); err != nil {
		t.Fatalf("DeleteGroupOffsets on a follower: %v", err)
	}
	if groups := follower.Offsets().Groups(); len(groups) != 0 {
		t.Fatalf("groups left after deleting: %v", groups)
	}
	if err := follower.DeleteTopic(testContext(t), "forwarded"); err != nil {
		t.Fatalf("DeleteTopic on a follower: %v", err)
	}
	if _, found := follower.Metadata().Topics["forwarded"]; found {
		t.Fatal("follower still describes the topic it deleted")
	}
}

// commitSync commits and waits for the answer.
func commitSync(t testing.TB, c *Coordinator, commits ...OffsetCommit) {
	t.Helper()
	result := make(chan error, 1)
	c.CommitOffsets(commits, func(err error) { result <- err })
	if err := <-result; err != nil {
		t.Fatalf("CommitOffsets on node %d: %v", c.NodeID(), err)
	}
}

func TestClusterForwardsOffsetCommitsInBatches(t *testing.T) {
	tc := startCluster(t, 3)
	controller, follower := tc.controller(), tc.follower()
	before := controller.servedCalls(opCommitOffsets)
	const commits = 500
	results := make(chan error, commits)
	for i := range commits {
		follower.CommitOffsets([]OffsetCommit{commitOf("g", "t", int32(i), int64(i))}, func(err error) { results <- err })
	}
	for range commits {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if got := len(follower.Offsets().Group("g")); got != commits {
		t.Fatalf("follower sees %d committed partitions, want %d", got, commits)
	}
	calls := controller.servedCalls(opCommitOffsets) - before
	if calls < 1 || calls > commits/10 {
		t.Fatalf("%d commits took %d forwarded calls; batches should carry many", commits, calls)
	}
	t.Logf("%d commits forwarded in %d calls", commits, calls)
}

func TestClusterControllerFailover(t *testing.T) {
	tc := startCluster(t, 3)
	registerWithSessions(t, tc, 3)
	old := tc.controller()
	oldID := old.NodeID()
	survivors := []*Coordinator{}
	for id := int32(1); id <= 3; id++ {
		if id != oldID {
			survivors = append(survivors, tc.node(id))
		}
	}
	stoppedAt := time.Now()
	tc.stop(oldID)
	elected := tc.controller()
	took := time.Since(stoppedAt)
	if elected.NodeID() == oldID {
		t.Fatal("the stopped node is still the controller")
	}
	t.Logf("new controller %d within %v of closing controller %d", elected.NodeID(), took, oldID)

	// Changes work again from either survivor.
	for _, c := range survivors {
		name := fmt.Sprintf("after-failover-%d", c.NodeID())
		if _, err := c.CreateTopic(testContext(t), name, 1, 2, nil, false); err != nil {
			t.Fatalf("CreateTopic on node %d after failover: %v", c.NodeID(), err)
		}
		if _, err := c.AllocateProducerIDs(testContext(t), c.NodeID(), 10); err != nil {
			t.Fatalf("AllocateProducerIDs on node %d after failover: %v", c.NodeID(), err)
		}
	}

	// The old controller comes back as a follower and catches up in Open; its broker (fenced
	// while it was down) heartbeats again and is unfenced.
	back := tc.restart(oldID)
	for _, c := range survivors {
		if _, found := back.Metadata().Topics[fmt.Sprintf("after-failover-%d", c.NodeID())]; !found {
			t.Fatalf("restarted node %d lacks a topic created while it was down", oldID)
		}
	}
	back.StartSession(back.Metadata().Brokers[oldID])
	awaitMetadata(t, back, "the returned broker unfenced", func(m *Metadata) bool { return len(m.LiveBrokerIDs()) == 3 })
	if _, err := back.CreateTopic(testContext(t), "from-the-returned", 1, 3, nil, false); err != nil {
		t.Fatalf("CreateTopic on the returned node: %v", err)
	}
}

func TestClusterCallsWaitForAController(t *testing.T) {
	tc := startCluster(t, 3)
	registerAll(t, tc)
	controller := tc.controller()
	follower := tc.follower()
	// Stop the controller and, before a new one can be elected, ask a follower for a change: the
	// call waits for the election and then succeeds.
	tc.stop(controller.NodeID())
	if _, err := follower.CreateTopic(testContext(t), "during-election", 1, 1, nil, false); err != nil {
		t.Fatalf("CreateTopic during the election: %v", err)
	}
	// Without a quorum a call ends with ctx, reporting both classes.
	for id := int32(1); id <= 3; id++ {
		if c := tc.node(id); c != nil && c != follower {
			tc.stop(id)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := follower.CreateTopic(ctx, "no-quorum", 1, 1, nil, false)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("CreateTopic without a quorum: %v, want ErrTimeout and ErrNotLeader", err)
	}
}

func TestClusterNonVoterJoins(t *testing.T) {
	tc := startCluster(t, 3)
	config := clusterConfig(t, 4, t.TempDir(), tc.voters)
	if err := tc.open(config); err != nil {
		t.Fatal(err)
	}
	observer := tc.node(4)
	registerAll(t, tc)
	if _, err := observer.CreateTopic(testContext(t), "from-observer", 2, 3, nil, false); err != nil {
		t.Fatalf("CreateTopic on a non-voter: %v", err)
	}
	future := tc.controller().raft.GetConfiguration()
	if err := future.Error(); err != nil {
		t.Fatal(err)
	}
	voters, nonVoters := 0, 0
	for _, server := range future.Configuration().Servers {
		if server.ID == raftServerID(4) && server.Suffrage == raft.Nonvoter {
			nonVoters++
		} else {
			voters++
		}
	}
	if voters != 3 || nonVoters != 1 {
		t.Fatalf("raft configuration %+v", future.Configuration())
	}
	// A restart comes back on another port and joins again.
	oldAddress := observer.RaftAddress()
	tc.stop(4)
	observer = tc.restart(4)
	if observer.RaftAddress() == oldAddress {
		t.Log("the restarted non-voter got its old port again")
	}
	if _, err := observer.CreateTopic(testContext(t), "after-rejoin", 1, 1, nil, false); err != nil {
		t.Fatalf("CreateTopic on a rejoined non-voter: %v", err)
	}
	awaitMetadata(t, observer, "both topics", func(m *Metadata) bool {
		return m.Topics["from-observer"] != nil && m.Topics["after-rejoin"] != nil
	})
}

func TestClusterIDMismatchRefused(t *testing.T) {
	// A data dir whose recorded cluster id differs from its replicated state.
	single := openTest(t, testConfig(t.TempDir()))
	config := single.config
	if err := single.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config.DataDir, clusterIDFile), []byte("AnotherClusterIdxxxxxx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Open(testContext(t), config); !errors.Is(err, ErrClusterMismatch) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Open of a data dir from another cluster: %v, want ErrClusterMismatch", err)
	}

	// A non-voter that joined one cluster and is then pointed at another.
	first := startCluster(t, 1)
	joiner := clusterConfig(t, 5, t.TempDir(), first.voters)
	if err := first.open(joiner); err != nil {
		t.Fatal(err)
	}
	first.stop(5)
	second := startCluster(t, 1)
	joiner.Voters = second.voters
	c, err := Open(testContext(t), joiner)
	if !errors.Is(err, ErrClusterMismatch) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("joining a second cluster with the first one's data dir: %v, want ErrClusterMismatch", err)
	}
	t.Logf("refused with: %v", err)
}

func TestParseVoters(t *testing.T) {
	voters, err := ParseVoters("3@c:3, 1@a:1,2@[::1]:2")
	if err != nil {
		t.Fatal(err)
	}
	want := []Voter{{1, "a:1"}, {2, "[::1]:2"}, {3, "c:3"}}
	if fmt.Sprint(voters) != fmt.Sprint(want) {
		t.Fatalf("parsed %v, want %v", voters, want)
	}
	if voters, err := ParseVoters(" "); err != nil || voters != nil {
		t.Fatalf("empty: %v %v", voters, err)
	}
	for _, bad := range []string{"1", "x@a:1", "1@a", "1@a:0", "1@:5", "1@a:1,1@b:2", "-1@a:1", "1@a:70000"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) accepted", bad)
		}
	}
}

// TestForwardedCallAbandonedWhenControllerSucceeded: a call forwarded to a controller that never
// answers (a paused process: the kernel still accepts its connections) ends as soon as another
// controller is published, with a retriable error, instead of at its deadline.
func TestForwardedCallAbandonedWhenControllerSucceeded(t *testing.T) {
	tc := startCluster(t, 3)
	old := tc.controller()
	oldID := old.NodeID()
	follower := tc.follower()
	silent := listen(t, "127.0.0.1:0") // accepts, never answers
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := follower.forwardUntilDeposed(ctx, silent.Addr().String(), oldID, oldID, opReadIndex, struct{}{}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the call to a silent controller ended before any other took over: %v", err)
	default:
	}
	tc.stop(oldID)
	elected := tc.controller()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("the abandoned call failed with %v, want a retriable ErrNotLeader", err)
		}
	case <-ctx.Done():
		t.Fatalf("the call to the silent controller still waits after controller %d took over", elected.NodeID())
	}
}
