package coordinator

import (
	"crypto/tls"
	"github.com/VictoriaMetrics/metrics"

	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Config configures a Coordinator. Start from DefaultConfig and set NodeID
// and DataDir.
type Config struct {
	// NodeID is this broker's Kafka node id; it doubles as the Raft server
	// id (its decimal string). Invariant: NodeID >= 0.
	NodeID int32

	// DataDir holds the Raft log and stable store (raft.db, raft-boltdb) and
	// the file snapshots (snapshots/). It is created if missing.
	DataDir string

	// RaftAddress is the TCP address the Raft transport binds to. Port 0
	// picks an ephemeral port; Coordinator.RaftAddress reports the result.
	RaftAddress string

	// RaftAdvertiseAddress is the address other voters dial. Empty means the
	// bound address, which must then not be a wildcard (0.0.0.0 or ::).
	RaftAdvertiseAddress string

	// Bootstrap makes a node with no Raft state on disk bootstrap a cluster
	// in which it is the only voter. A node with existing state ignores it,
	// and so does every node when Voters is set.
	Bootstrap bool

	// Voters is the Raft voter set (Kafka's controller.quorum.voters). Empty
	// means a one-voter cluster of this node alone (see Bootstrap). When it
	// is set, a listed node with no state bootstraps the cluster with exactly
	// this voter set (every voter bootstraps the same configuration), and
	// its entry's RaftAddress is the address it advertises; a node not
	// listed joins as a non-voter by asking the controller (reached through
	// the voters) to add it. Invariant: node ids are distinct and every
	// address is host:port with a port in 1..65535.
	Voters []Voter

	// Listener, when not nil, is the socket the Raft port serves on instead
	// of a new one bound to RaftAddress (tests bind their ports before
	// choosing the voter set). The Coordinator closes it.
	Listener net.Listener

	// RaftTLS, when not nil, wraps every connection accepted on the Raft port
	// (Raft RPCs and forwarded calls such as broker heartbeats) in TLS, and
	// RaftDialTLS every connection this node opens to another's Raft port;
	// both or neither (see stream_layer.go).
	RaftTLS     *tls.Config
	RaftDialTLS *tls.Config

	// Logger receives Raft's and the Coordinator's log lines. Nil discards
	// them.
	Logger *slog.Logger

	// Metrics receives the controller's metrics (metrics.go); nil: a private set.
	Metrics *metrics.Set

	// ApplyTimeout bounds how long a change may wait to be handed to Raft,
	// and bounds the leadership barrier a new leader runs. Invariant: > 0.
	ApplyTimeout time.Duration

	// Raft timing. Production values follow hashicorp/raft's defaults; tests
	// shrink them to make a single node elect itself within milliseconds.
	// Invariants (checked by raft.ValidateConfig): HeartbeatTimeout,
	// ElectionTimeout and LeaderLeaseTimeout >= 5ms; LeaderLeaseTimeout <=
	// HeartbeatTimeout <= ElectionTimeout; CommitTimeout >= 1ms.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// SnapshotInterval is how often Raft checks whether SnapshotThreshold
	// log entries have accumulated since the last snapshot; if so it
	// snapshots the state machine and truncates the log, keeping
	// TrailingLogs entries. SnapshotsRetained file snapshots are kept.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotsRetained int

	// OffsetCommitLinger is how long the offset-commit batcher waits for more commits after the
	// first one before proposing the batch; OffsetCommitBatch caps the commits in one Raft entry.
	// While one batch is in Raft the next one gathers, so under load batches grow without waiting.
	// Invariants: OffsetCommitLinger >= 0, OffsetCommitBatch >= 1.
	OffsetCommitLinger time.Duration
	OffsetCommitBatch  int

	// Broker sessions (sessions.go): a broker heartbeats every BrokerHeartbeatInterval; the
	// controller fences one it has not heard from for BrokerSessionTimeout. Every
	// LeaderRebalanceInterval (0: never) the controller moves leadership back to preferred
	// replicas that are live and in sync. A broker silent for BrokerProbeAfter (0: never) is
	// probed: if its registered address refuses connections, its process is gone and it is
	// fenced at once (liveness_probe.go). Invariant: 0 < BrokerHeartbeatInterval <
	// BrokerSessionTimeout; 0 <= BrokerProbeAfter.
	BrokerHeartbeatInterval time.Duration
	BrokerSessionTimeout    time.Duration
	BrokerProbeAfter        time.Duration
	LeaderRebalanceInterval time.Duration

	// BallastBytes is the size of the file kept beside the Raft log and given up when its disk
	// fills (ballast.go); 0: none. Invariant: >= 0.
	BallastBytes int64
}

// DefaultConfig returns production defaults. NodeID is 0 and DataDir is
// empty: the caller must set DataDir.
func DefaultConfig() Config {
	return Config{
		NodeID:             0,
		RaftAddress:        "127.0.0.1:9093",
		Bootstrap:          true,
		ApplyTimeout:       10 * time.Second,
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotInterval:   120 * time.Second,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		SnapshotsRetained:  2,
		OffsetCommitLinger: time.Millisecond,
		OffsetCommitBatch:  4096,

		BrokerHeartbeatInterval: 200 * time.Millisecond,
		BrokerSessionTimeout:    1500 * time.Millisecond,
		BrokerProbeAfter:        400 * time.Millisecond, // two missed heartbeats
		LeaderRebalanceInterval: 30 * time.Second,
		BallastBytes:            16 << 20,
	}
}

// Validate reports the first problem with c, wrapped with the package name.
func (c Config) Validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("coordinator: config: NodeID %d is negative", c.NodeID)
	}
	if c.DataDir == "" {
		return fmt.Errorf("coordinator: config: DataDir is empty")
	}
	if c.Listener == nil {
		if _, _, err := net.SplitHostPort(c.RaftAddress); err != nil {
			return fmt.Errorf("coordinator: config: RaftAddress %q: %w", c.RaftAddress, err)
		}
	}
	if c.RaftAdvertiseAddress != "" {
		if _, err := net.ResolveTCPAddr("tcp", c.RaftAdvertiseAddress); err != nil {
			return fmt.Errorf("coordinator: config: RaftAdvertiseAddress %q: %w", c.RaftAdvertiseAddress, err)
		}
	}
	if err := validateVoters(c.Voters); err != nil {
		return err
	}
	if own, isVoter := c.ownVoter(); isVoter && c.RaftAdvertiseAddress != "" && c.RaftAdvertiseAddress != own.RaftAddress {
		return fmt.Errorf("coordinator: config: RaftAdvertiseAddress %q differs from node %d's voter address %q",
			c.RaftAdvertiseAddress, c.NodeID, own.RaftAddress)
	}
	if c.ApplyTimeout <= 0 {
		return fmt.Errorf("coordinator: config: ApplyTimeout %s must be positive", c.ApplyTimeout)
	}
	if c.BrokerHeartbeatInterval <= 0 || c.BrokerSessionTimeout <= c.BrokerHeartbeatInterval || c.LeaderRebalanceInterval < 0 || c.BrokerProbeAfter < 0 {
		return fmt.Errorf("coordinator: config: heartbeat interval %v must be positive and below the session timeout %v, rebalance interval %v and probe delay %v not negative",
			c.BrokerHeartbeatInterval, c.BrokerSessionTimeout, c.LeaderRebalanceInterval, c.BrokerProbeAfter)
	}
	if c.BallastBytes < 0 {
		return fmt.Errorf("coordinator: config: BallastBytes %d is negative", c.BallastBytes)
	}
	if c.SnapshotThreshold == 0 {
		return fmt.Errorf("coordinator: config: SnapshotThreshold must be positive")
	}
	if c.SnapshotsRetained < 1 {
		return fmt.Errorf("coordinator: config: SnapshotsRetained %d must be at least 1", c.SnapshotsRetained)
	}
	if c.OffsetCommitLinger < 0 || c.OffsetCommitBatch < 1 {
		return fmt.Errorf("coordinator: config: offset commit linger %v must not be negative and batch %d must be positive",
			c.OffsetCommitLinger, c.OffsetCommitBatch)
	}
	if err := raft.ValidateConfig(c.raftConfig(nil)); err != nil {
		return fmt.Errorf("coordinator: config: %w", err)
	}
	return nil
}

// raftServerID is the Raft server id of a node: its decimal node id.
func raftServerID(nodeID int32) raft.ServerID {
	return raft.ServerID(strconv.FormatInt(int64(nodeID), 10))
}

// nodeIDOf inverts raftServerID; it returns -1 for an empty or foreign id.
func nodeIDOf(id raft.ServerID) int32 {
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil || n < 0 {
		return -1
	}
	return int32(n)
}

// raftConfig translates c into hashicorp/raft's configuration.
func (c Config) raftConfig(notify chan<- bool) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raftServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotInterval = c.SnapshotInterval
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.NotifyCh = notify
	rc.NoLegacyTelemetry = true
	return rc
}
