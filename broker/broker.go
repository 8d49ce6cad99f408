package broker

import (
	"crypto/rand"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/loglimit"
	"github.com/sluice-mq/sluice/netpoll"
	"github.com/sluice-mq/sluice/replication"
	"github.com/sluice-mq/sluice/segment"
	"github.com/sluice-mq/sluice/trash"
)

// Broker is one sluice node serving the Kafka protocol.
type Broker struct {
	config      Config
	logger      *slog.Logger
	metrics     *brokerMetrics
	coordinator *coordinator.Coordinator
	registry    *registry
	server      *netpoll.Server
	advertised  hostPort // the inter-broker listener's advertised address
	apis        apiTable
	groups      *groupCoordinator
	producerIDs *producerIDAllocator
	replicas    *replication.Manager
	followers   followerConnections
	cleaner     *logCleaner
	txns        *txnCoordinator // transaction coordinator (txn_coordinator.go)
	shares      *shareManager   // share groups and share partitions (share.go)
	// consumerGroups are the KIP-848 consumer groups (consumer_groups.go).
	consumerGroups *consumerGroups
	// security holds SASL and ACL machinery (security.go).
	security *security

	// badRequestLog rate-limits the warning for requests that close their connection: a client
	// can send them at will.
	badRequestLog *loglimit.Limiter
	// timing observes completed requests: stage histograms, slow log, traces (request_timing.go).
	timing *requestTiming

	// endpoints are every listener's advertised address (advertised is the inter-broker one's);
	// endpointsOfOthers caches other brokers' parsed registrations (listeners.go).
	endpoints         listenerEndpoints
	endpointsOfOthers endpointCache

	unsubscribe func()
	// closing makes parked fetches answer at once, so shutdown does not wait out their max wait.
	closing    atomic.Bool
	stop       chan struct{}
	background sync.WaitGroup
	closeOnce  sync.Once
}

// Start opens the metadata store and the logs, then listens. It returns once the broker serves.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Broker{config: cfg, logger: logger, stop: make(chan struct{})}
	b.badRequestLog = loglimit.New(logger, loglimit.DefaultInterval, loglimit.DefaultBurst)
	b.followers.onGone = b.followerGone
	b.metrics = newBrokerMetrics(cfg.Metrics, newTopicMetrics(cfg.MetricsMaxTopics, b.holdsTopic))
	b.security = b.newSecurity()
	b.timing = newRequestTiming(cfg.RequestTiming, b.metrics.set, loglimit.New(logger, loglimit.DefaultInterval, loglimit.DefaultBurst))
	cleaner, err := newLogCleaner(cfg.Cleaner, cfg.Metrics)
	if err != nil {
		return nil, err
	}
	b.cleaner = cleaner
	b.apis = newAPITable()
	b.groups = newGroupCoordinator(cfg.Groups)
	b.shares = newShareManager(b, logger.With("component", "share"))
	b.consumerGroups = newConsumerGroups(b, logger.With("component", "consumer-groups"))
	logDefaults := cfg.Log
	logDefaults.ObserveFsync = b.metrics.observeFsync
	// The broker's appenders are remote (producers, followers): a yield before each fsync lets
	// none of them in and delays the fsync behind every runnable goroutine (segment.Config).
	logDefaults.FlushYield = false
	if logDefaults.Logger == nil {
		logDefaults.Logger = logger
	}
	replicationCfg := cfg.Replication
	replicationCfg.NodeID = cfg.NodeID
	replicationCfg.ObserveAckWait = b.metrics.observeReplicaWait
	if cfg.interBrokerSpec().Protocol.TLS() {
		replicationCfg.TLS = cfg.InterBrokerTLS
	}
	if cfg.Security.InterBrokerUser != "" && replicationCfg.Authenticate == nil {
		replicationCfg.Authenticate = b.interBrokerAuthenticate // interbroker_sasl.go
	}
	b.replicas, err = replication.NewManager(replicationCfg, b.brokerAddress, b.proposeISR, cfg.Metrics, logger.With("component", "replication"))
	if err != nil {
		return nil, err
	}
	b.replicas.SetUnreachableReporter(b.reportUnreachableLeader)
	b.replicas.SetResigner(b.resignLeadership) // partition_damage.go
	b.registry = newRegistry(cfg.NodeID, filepath.Join(cfg.DataDir, "topics"), logDefaults, cfg.MaxMessageBytes, b.replicas, replicationCfg, logger)
	b.registry.leaderElections = b.metrics.leaderElections

	coordCfg := coordinator.DefaultConfig()
	coordCfg.NodeID = cfg.NodeID
	coordCfg.DataDir = cfg.metadataDir()
	coordCfg.RaftAddress = cfg.RaftListen
	coordCfg.Bootstrap = true
	coordCfg.Voters = cfg.ControllerVoters
	coordCfg.BrokerSessionTimeout, coordCfg.BrokerHeartbeatInterval = cfg.BrokerSessionTimeout, cfg.BrokerHeartbeatInterval
	coordCfg.LeaderRebalanceInterval = cfg.LeaderRebalanceInterval
	coordCfg.Logger = logger.With("component", "coordinator")
	coordCfg.Metrics = cfg.Metrics
	if cfg.interBrokerSpec().Protocol.TLS() {
		coordCfg.RaftTLS, coordCfg.RaftDialTLS = cfg.RaftTLS, cfg.InterBrokerTLS
	}
	if len(cfg.ControllerVoters) <= 1 {
		// A one-voter cluster elects itself at once; short timeouts make startup quick.
		coordCfg.HeartbeatTimeout, coordCfg.ElectionTimeout, coordCfg.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		b.replicas.Close()
		return nil, fmt.Errorf("broker: create data dir: %w", err)
	}
	if b.coordinator, err = coordinator.Open(ctx, coordCfg); err != nil {
		b.replicas.Close()
		return nil, fmt.Errorf("broker: open metadata: %w", err)
	}
	// Deleted partitions' files are removed in the background (what an earlier run left included),
	// before the first metadata is applied so that the sweep sees only directories moved aside.
	if b.registry.trash, err = trash.New(trash.DefaultConfig(), logger.With("component", "trash")); err != nil {
		b.replicas.Close()
		return nil, errors.Join(err, b.coordinator.Close())
	}
	if err := b.registry.trash.Sweep(b.registry.dir); err != nil {
		logger.Error("deleted partitions left by an earlier run stay on disk", "err", err)
	}
	b.warnMountOptions()
	b.shares.start()
	b.consumerGroups.start()
	b.producerIDs = newProducerIDAllocator(b.coordinator, cfg.NodeID, producerIDBlockSize)
	b.txns = newTxnCoordinator(b, b.metrics.set)
	// This run's incarnation: until the controller has recorded it (and fenced what the previous
	// run led), the registry leads nothing, however stale metadata reads.
	b.registry.incarnation = rand.Text()
	b.unsubscribe = b.coordinator.Subscribe(func(old, new *coordinator.Metadata) {
		b.registry.applyMetadata(old, new)
		live := new.LiveBrokerIDs()
		b.groups.dropMoved(func(id string) bool { return group.CoordinatorFor(id, live) == b.config.NodeID })
	})
	if err := b.registry.waitVersion(ctx, b.coordinator.Metadata().Version); err != nil {
		b.shutdownMetadata()
		return nil, err
	}

	netCfg := netpoll.DefaultConfig()
	netCfg.Address = cfg.Listen
	netCfg.Listeners = cfg.netListeners()
	netCfg.MaxFrameBytes = cfg.MaxFrameBytes
	netCfg.MaxServerInFlightBytes = cfg.MaxInFlightBytes
	netCfg.MaxConnections = cfg.MaxConnections
	netCfg.MaxBufferedInputBytes, netCfg.MaxBufferedOutputBytes = cfg.MaxBufferedInputBytes, cfg.MaxBufferedOutputBytes
	netCfg.ConnectionsMaxIdle, netCfg.RequestReceiveTimeout = cfg.ConnectionsMaxIdle, cfg.RequestReceiveTimeout
	netCfg.Logger = logger.With("component", "netpoll")
	netCfg.Metrics = cfg.Metrics
	if b.server, err = netpoll.Listen(netCfg, b); err != nil {
		b.shutdownMetadata()
		return nil, fmt.Errorf("broker: listen: %w", err)
	}
	if err = b.resolveEndpoints(); err != nil {
		b.Close(ctx)
		return nil, err
	}
	registration := coordinator.Broker{NodeID: cfg.NodeID, Host: b.advertised.host, Port: b.advertised.port, Endpoints: b.endpoints.text, Incarnation: b.registry.incarnation}
	if err := b.coordinator.RegisterBroker(ctx, registration); err != nil {
		b.Close(ctx)
		return nil, fmt.Errorf("broker: register: %w", err)
	}
	// The registration fenced what the previous run led; the first heartbeat lifts the fence and
	// elects this node again where it should lead, at new epochs. Serve once that is applied here.
	if err := b.coordinator.Heartbeat(ctx, cfg.NodeID); err != nil {
		b.Close(ctx)
		return nil, fmt.Errorf("broker: first heartbeat: %w", err)
	}
	if err := b.registry.waitVersion(ctx, b.coordinator.Metadata().Version); err != nil {
		b.Close(ctx)
		return nil, fmt.Errorf("broker: apply metadata after registering: %w", err)
	}
	b.coordinator.StartSession(registration)
	b.background.Add(1)
	go b.runSessionLapseCheck()
	b.background.Add(2)
	go b.runRetention()
	b.background.Add(1)
	go b.runCleaner()
	go b.txns.runChecker()
	logger.Info("broker serving", "listen", b.server.Addr().String(), "advertise", net.JoinHostPort(b.advertised.host, strconv.Itoa(int(b.advertised.port))),
		"listeners", b.endpoints.text, "node", cfg.NodeID, "data", cfg.DataDir)
	return b, nil
}

func advertisedAddress(advertise string, bound net.Addr) (hostPort, error) {
	if advertise != "" {
		return splitAdvertise(advertise)
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return hostPort{}, fmt.Errorf("broker: listener address %v is not TCP", bound)
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		name, err := os.Hostname()
		if err != nil {
			return hostPort{}, fmt.Errorf("broker: listening on a wildcard address needs --advertise: %w", err)
		}
		host = name
	}
	return hostPort{host: host, port: int32(tcp.Port)}, nil
}

// Addr is the bound address of the first Kafka listener.
func (b *Broker) Addr() net.Addr { return b.server.Addr() }

// ListenerAddr is the bound address of the named listener, or nil.
func (b *Broker) ListenerAddr(name string) net.Addr { return b.server.ListenerAddr(name) }

// SendfileBytes is the number of fetch bytes sent with sendfile so far.
func (b *Broker) SendfileBytes() uint64 { return b.server.SendfileBytes() }

// Close stops accepting connections, lets in-flight requests finish (until ctx ends), then closes
// every log cleanly and the metadata store.
func (b *Broker) Close(ctx context.Context) error {
	var errs []error
	b.closeOnce.Do(func() {
		b.controlledShutdown(ctx)
		b.closing.Store(true)
		b.registry.forEach(func(p *partition) { p.appended() })
		close(b.stop)
		b.groups.close()      // parked JoinGroup/SyncGroup answer now, not after a rebalance
		b.shares.wakeParked() // parked ShareFetches answer now
		if b.server != nil {
			errs = append(errs, b.server.Close(ctx))
		}
		// After the last request: what it acknowledged or changed is written too.
		b.shares.close()
		b.consumerGroups.close()
		b.background.Wait()
		b.checkpointTransactions(ctx)
		errs = append(errs, b.shutdownMetadata())
	})
	return errors.Join(errs...)
}

func (b *Broker) shutdownMetadata() error {
	if b.unsubscribe != nil {
		b.unsubscribe()
	}
	if b.txns != nil {
		b.txns.close()
	}
	b.replicas.Close()
	b.registry.closeAll()
	return b.coordinator.Close()
}

// runRetention applies retention to every log periodically.
func (b *Broker) runRetention() {
	defer b.background.Done()
	ticker := time.NewTicker(b.config.RetentionCheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-ticker.C:
		}
		b.registry.forEach(func(p *partition) {
			deleted, err := p.log.ApplyRetention()
			if err != nil && !errors.Is(err, segment.ErrClosed) {
				b.logger.Error("retention", "topic", p.topic, "partition", p.index, "err", err)
			}
			if deleted > 0 {
				b.logger.Info("retention deleted segments", "topic", p.topic, "partition", p.index, "segments", deleted, "log_start", p.log.LogStartOffset())
			}
		})
	}
}
