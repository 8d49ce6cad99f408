package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/listener"
	"github.com/sluice-mq/sluice/replication"
	"github.com/sluice-mq/sluice/segment"
)

// Config configures a Broker.
type Config struct {
	// NodeID is this broker's id in the cluster.
	NodeID int32
	// DataDir holds the partition logs (DataDir/topics) and, unless MetadataDir says otherwise,
	// the metadata (DataDir/meta).
	DataDir string
	// MetadataDir holds the metadata: the Raft log and snapshots, and the cluster id (Kafka's
	// metadata.log.dir); empty: DataDir/meta. On a disk of its own, a Raft commit's fsync does
	// not wait behind the partition logs' writes (see perf/TUNING.md).
	MetadataDir string
	// Listen is the Kafka listener address; port 0 picks an ephemeral port.
	Listen string
	// Advertise is the host:port given to clients in Metadata; empty means the bound listener address.
	Advertise string
	// Listeners are the named Kafka listeners (see listeners.go); empty means one PLAINTEXT
	// listener on Listen, advertised as Advertise.
	Listeners []listener.Spec
	// AdvertisedListeners maps a listener's name to the host:port given to clients that came
	// in on it; a listener without an entry advertises its bound address.
	AdvertisedListeners map[string]string
	// InterBrokerListener names the listener other brokers dial (replication, transaction
	// markers); empty means the first. Its security also applies to the Raft port.
	InterBrokerListener string
	// TLS is the server config of SSL and SASL_SSL listeners; RaftTLS that of the Raft port
	// and InterBrokerTLS the client config for dialing other brokers, both used when the
	// inter-broker listener is SSL.
	TLS            *tls.Config
	RaftTLS        *tls.Config
	InterBrokerTLS *tls.Config
	// RaftListen is the address of the metadata Raft transport; port 0 picks one. With
	// ControllerVoters it defaults to this node's entry there.
	RaftListen string
	// ControllerVoters is the Raft voter set of a cluster (Kafka's controller.quorum.voters);
	// empty: a one-node cluster of this broker alone.
	ControllerVoters []coordinator.Voter
	// BrokerSessionTimeout and BrokerHeartbeatInterval: a broker that has not heartbeaten to the
	// controller for the timeout is fenced (its partitions led elsewhere).
	BrokerSessionTimeout    time.Duration
	BrokerHeartbeatInterval time.Duration
	// LeaderRebalanceInterval is how often the controller moves leadership back to preferred
	// replicas that are in sync again (Kafka's auto.leader.rebalance.enable with
	// leader.imbalance.check.interval.seconds); 0 turns it off.
	LeaderRebalanceInterval time.Duration

	// AutoCreateTopics creates unknown topics named in Metadata requests that allow it.
	AutoCreateTopics bool
	// DefaultPartitions and DefaultReplicationFactor apply to auto-created topics and to CreateTopics
	// requests that leave them at -1.
	DefaultPartitions        int32
	DefaultReplicationFactor int16
	// MaxMessageBytes is the default max.message.bytes: the largest record batch a produce may carry.
	MaxMessageBytes int32
	// Log holds the default log settings; topic configs override them.
	Log segment.Config
	// RetentionCheckInterval is how often retention runs over every log.
	RetentionCheckInterval time.Duration
	// Cleaner configures the log cleaner of compacted topics (log_cleaner.go).
	Cleaner CleanerConfig
	// Groups holds the consumer group coordinator's session bounds and initial rebalance delay.
	Groups group.Config

	// Replication holds the follower fetch and ISR settings (NodeID is taken from NodeID above).
	Replication replication.Config
	// Transactions configures the transaction coordinator (txn_config.go).
	Transactions TransactionConfig
	// Security configures SASL authentication and ACL authorization (security_config.go).
	Security SecurityConfig
	// RequestTiming configures the slow-request log and tracing (request_timing.go).
	RequestTiming RequestTimingConfig

	// MaxFrameBytes is the largest request accepted; larger ones close the connection.
	MaxFrameBytes int
	// MaxInFlightBytes bounds request bytes in flight across all connections (produce data).
	MaxInFlightBytes int64
	// MaxConnections bounds open client connections (Kafka's max.connections); 0: no bound.
	MaxConnections int
	// MaxBufferedInputBytes bounds request bytes received and not yet handled, across all
	// connections (partial frames, requests waiting behind backpressure); past it the
	// connection holding the most is closed.
	MaxBufferedInputBytes int64
	// MaxBufferedOutputBytes bounds response bytes waiting for slow readers across all
	// connections; past it the connection holding the most is closed.
	MaxBufferedOutputBytes int64
	// ConnectionsMaxIdle closes connections idle this long (connections.max.idle.ms); 0: never.
	ConnectionsMaxIdle time.Duration
	// RequestReceiveTimeout closes a connection whose request has been partially received for
	// this long; 0: never.
	RequestReceiveTimeout time.Duration

	Logger  *slog.Logger
	Metrics *metrics.Set
	// MetricsMaxTopics bounds the topics with series of their own on /metrics, per topic and per
	// partition (metrics_topics.go); the traffic of further topics counts under topic="__other".
	MetricsMaxTopics int
}

// DefaultConfig returns a single-node broker listening on Kafka's default port.
func DefaultConfig() Config {
	return Config{
		NodeID:                   1,
		DataDir:                  "./data",
		Listen:                   "127.0.0.1:9092",
		RaftListen:               "127.0.0.1:0",
		BrokerSessionTimeout:     1500 * time.Millisecond,
		BrokerHeartbeatInterval:  200 * time.Millisecond,
		LeaderRebalanceInterval:  30 * time.Second,
		AutoCreateTopics:         true,
		DefaultPartitions:        1,
		DefaultReplicationFactor: 1,
		MaxMessageBytes:          1048588,
		Log:                      segment.DefaultConfig(),
		RetentionCheckInterval:   5 * time.Minute,
		Cleaner:                  DefaultCleanerConfig(),
		Groups:                   group.DefaultConfig(),
		Replication:              replication.DefaultConfig(),
		Transactions:             DefaultTransactionConfig(),
		RequestTiming:            DefaultRequestTimingConfig(),
		MaxFrameBytes:            100 << 20,
		MaxInFlightBytes:         512 << 20,
		MaxBufferedInputBytes:    512 << 20,
		MaxBufferedOutputBytes:   256 << 20,
		ConnectionsMaxIdle:       10 * time.Minute,
		RequestReceiveTimeout:    time.Minute,
		MetricsMaxTopics:         500,
	}
}

// metadataDir is where the metadata lives: MetadataDir, or DataDir/meta.
func (c Config) metadataDir() string {
	if c.MetadataDir != "" {
		return c.MetadataDir
	}
	return filepath.Join(c.DataDir, "meta")
}

// isWithin reports whether path is dir or inside it, comparing them made absolute and clean.
func isWithin(path, dir string) bool {
	path, pathErr := filepath.Abs(path)
	dir, dirErr := filepath.Abs(dir)
	if pathErr != nil || dirErr != nil {
		return false
	}
	relative, err := filepath.Rel(dir, path)
	return err == nil && relative != ".." && !strings.HasPrefix(relative, ".."+string(filepath.Separator))
}

// Validate reports every unusable setting.
func (c Config) Validate() error {
	var errs []error
	if c.NodeID < 0 {
		errs = append(errs, fmt.Errorf("node id %d is negative", c.NodeID))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is empty"))
	}
	if topics := filepath.Join(c.DataDir, "topics"); c.MetadataDir != "" && isWithin(c.MetadataDir, topics) {
		// Every folder there is a partition's: one the metadata does not know is moved aside.
		errs = append(errs, fmt.Errorf("metadata dir %s is inside %s, where the partition logs live", c.MetadataDir, topics))
	}
	errs = append(errs, c.validateListeners()...)
	if c.Advertise != "" {
		if _, err := splitAdvertise(c.Advertise); err != nil {
			errs = append(errs, err)
		}
	}
	if c.BrokerHeartbeatInterval <= 0 || c.BrokerSessionTimeout <= c.BrokerHeartbeatInterval {
		errs = append(errs, fmt.Errorf("broker heartbeat interval %v must be positive and below the session timeout %v", c.BrokerHeartbeatInterval, c.BrokerSessionTimeout))
	}
	if c.LeaderRebalanceInterval < 0 {
		errs = append(errs, fmt.Errorf("leader rebalance interval %v is negative", c.LeaderRebalanceInterval))
	}
	if c.DefaultPartitions < 1 {
		errs = append(errs, fmt.Errorf("default partitions %d must be at least 1", c.DefaultPartitions))
	}
	if c.DefaultReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("default replication factor %d must be at least 1", c.DefaultReplicationFactor))
	}
	if c.MaxMessageBytes < 1 {
		errs = append(errs, fmt.Errorf("max message bytes %d must be positive", c.MaxMessageBytes))
	}
	if c.RetentionCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("retention check interval %v must be positive", c.RetentionCheckInterval))
	}
	if err := c.Cleaner.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MetricsMaxTopics < 0 {
		errs = append(errs, fmt.Errorf("metrics max topics %d is negative", c.MetricsMaxTopics))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max connections %d is negative", c.MaxConnections))
	}
	if c.MaxBufferedInputBytes < int64(c.MaxFrameBytes)+4 {
		errs = append(errs, fmt.Errorf("max buffered input bytes %d is below one maximal request (%d bytes)", c.MaxBufferedInputBytes, c.MaxFrameBytes+4))
	}
	if c.MaxBufferedOutputBytes < 4<<20 {
		errs = append(errs, fmt.Errorf("max buffered output bytes %d is below 4 MiB", c.MaxBufferedOutputBytes))
	}
	if c.ConnectionsMaxIdle < 0 || c.RequestReceiveTimeout < 0 {
		errs = append(errs, fmt.Errorf("connections max idle %v and request receive timeout %v must not be negative", c.ConnectionsMaxIdle, c.RequestReceiveTimeout))
	}
	if c.MaxFrameBytes < 1024 {
		errs = append(errs, fmt.Errorf("max frame bytes %d below 1024", c.MaxFrameBytes))
	}
	if err := c.Log.Validate(); err != nil {
		errs = append(errs, err)
	}
	replicationConfig := c.Replication
	replicationConfig.NodeID = max(c.NodeID, 0)
	if err := replicationConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Groups.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Transactions.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Security.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.RequestTiming.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker: invalid config: %w", err)
	}
	return nil
}

type hostPort struct {
	host string
	port int32
}

func splitAdvertise(address string) (hostPort, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return hostPort{}, fmt.Errorf("advertise address %q: %w", address, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return hostPort{}, fmt.Errorf("advertise address %q: port must be 1-65535", address)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return hostPort{}, fmt.Errorf("advertise address %q: clients cannot dial a wildcard host", address)
	}
	return hostPort{host: host, port: int32(port)}, nil
}
