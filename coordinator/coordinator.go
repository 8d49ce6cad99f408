package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Coordinator is one node's handle on the replicated cluster metadata.
type Coordinator struct {
	config Config
	logger *slog.Logger
	view   *view
	fsm    *fsm
	// raft is set once in Open, before raftStarted is closed; the stream layer accepts forwarded
	// calls earlier (it carries Raft's own connections), and they wait for raftStarted.
	raft        *raft.Raft
	raftStarted chan struct{}
	transport   *raft.NetworkTransport
	stream      *streamLayer // the Raft port: Raft's connections and forwarded calls
	forwarder   *forwardClient
	metrics     coordinatorMetrics
	store       *raftboltdb.BoltStore
	// served counts forwarded calls served by this node, per operation.
	served struct {
		sync.Mutex
		counts map[operation]int64
	}

	// leadershipChanges receives this node's own leadership changes from
	// raft (Config.NotifyCh, capacity 1, latest value wins); observations
	// receives every leader change raft observes. Both only wake the
	// leadership goroutine, which then reads raft's live state.
	leadershipChanges chan bool
	observations      chan raft.Observation
	observer          *raft.Observer

	stop           chan struct{} // closed by Close
	closing        context.Context
	cancelClosing  context.CancelFunc // called by Close, with stop
	leadershipDone chan struct{}      // closed when the leadership goroutine exits

	// offsetCommits queues CommitOffsets calls for the batcher goroutine (offset_batcher.go),
	// which closes offsetBatcherDone when it exits.
	offsetCommits     chan pendingCommit
	offsetBatcherDone chan struct{}
	// liveness is the controller's view of broker sessions and the goroutine checking them;
	// session is this node's own heartbeat loop (sessions.go).
	liveness     liveness
	livenessDone chan struct{}
	session      session
	// offsetQueue.closed is set by the batcher as it exits; senders hold the read lock while
	// sending, so nothing enters the queue after the batcher drained it.
	offsetQueue struct {
		sync.RWMutex
		closed bool
	}
	// barrier batches ReadBarrier callers into rounds (read_barrier.go).
	barrier   readBarrier
	closeOnce sync.Once
	closeErr  error
}

// Open opens (or, with cfg.Bootstrap or cfg.Voters and an empty DataDir,
// creates) this node's Raft state and starts Raft. A node not in cfg.Voters
// first asks the controller to add it as a non-voter.
//
// When this node belongs to a known configuration (it bootstrapped now or
// earlier, has replicated state, or cfg.Voters is set), Open waits until the
// cluster has a caught-up controller and a cluster id, and until this node
// has applied everything the controller had applied when asked; for a
// single node that means it is itself the controller. It then compares the
// cluster id with the one recorded in DataDir/cluster-id (ErrClusterMismatch
// if they differ) and records it on the first start. If ctx ends first,
// Open closes everything and returns an error wrapping ErrTimeout. A node
// with no state, no Voters and Bootstrap false returns at once; use
// WaitLeader.
func Open(ctx context.Context, cfg Config) (_ *Coordinator, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("coordinator: create data dir: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	raftLog := newRaftLogger(logger)
	if cfg.Listener != nil {
		// Close it on every failure below; once the stream layer owns it,
		// closing the layer closes it again, which is harmless.
		defer func() {
			if err != nil {
				cfg.Listener.Close()
			}
		}()
	}
	c := &Coordinator{
		config:            cfg,
		logger:            logger,
		view:              newView(),
		leadershipChanges: make(chan bool, 1),
		observations:      make(chan raft.Observation, 16),
		stop:              make(chan struct{}),
		leadershipDone:    make(chan struct{}),
		offsetCommits:     make(chan pendingCommit, offsetCommitQueueLength),
		offsetBatcherDone: make(chan struct{}),
		livenessDone:      make(chan struct{}),
		raftStarted:       make(chan struct{}),
	}
	c.closing, c.cancelClosing = context.WithCancel(context.Background())
	c.liveness.deposed = -1
	c.metrics = newCoordinatorMetrics(cfg.Metrics, c)
	c.forwarder = newForwardClient(forwardDialTimeout)
	c.forwarder.dialTLS = cfg.RaftDialTLS
	c.served.counts = map[operation]int64{}
	c.fsm = newFSM(c.view.setState, logger)

	// Undo what was opened if a later step fails.
	var cleanups []func()
	defer func() {
		if err != nil {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}
	}()

	// bbolt memory-maps the file and dies with SIGBUS on a page past a truncated end: check first.
	if err := checkBoltFile(filepath.Join(cfg.DataDir, "raft.db")); err != nil {
		return nil, err
	}
	c.store, err = raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(cfg.DataDir, "raft.db"),
		// Fail instead of hanging when another process holds the file.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("coordinator: open raft log in %s: %w", cfg.DataDir, err)
	}
	cleanups = append(cleanups, func() { c.store.Close() })
	stable := &ballastedStore{BoltStore: c.store, ballast: newBallast(filepath.Join(cfg.DataDir, "raft.ballast"), cfg.BallastBytes, logger)}
	logStore, err := raft.NewLogCache(256, stable)
	if err != nil {
		return nil, fmt.Errorf("coordinator: raft log cache: %w", err)
	}
	snapshots, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotsRetained, raftLog)
	if err != nil {
		return nil, fmt.Errorf("coordinator: raft snapshot store: %w", err)
	}

	var advertise net.Addr
	advertiseAddress := cfg.RaftAdvertiseAddress
	if own, isVoter := cfg.ownVoter(); isVoter {
		advertiseAddress = own.RaftAddress
	}
	if advertiseAddress != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", advertiseAddress); err != nil {
			return nil, fmt.Errorf("coordinator: resolve raft advertise address: %w", err)
		}
	}
	listener := cfg.Listener
	if listener == nil {
		if listener, err = net.Listen("tcp", cfg.RaftAddress); err != nil {
			return nil, fmt.Errorf("coordinator: raft transport on %s: %w", cfg.RaftAddress, err)
		}
	}
	if c.stream, err = newStreamLayer(listener, advertise, c.serveForwarding, cfg.RaftTLS, cfg.RaftDialTLS); err != nil {
		listener.Close()
		return nil, err
	}
	cleanups = append(cleanups, func() { c.stream.Close() })
	c.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  c.stream,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  raftLog,
	})
	cleanups = append(cleanups, func() { c.transport.Close() })

	raftConfig := cfg.raftConfig(c.leadershipChanges)
	raftConfig.Logger = raftLog
	hasState, err := raft.HasExistingState(logStore, stable, snapshots)
	if err != nil {
		return nil, fmt.Errorf("coordinator: inspect raft state: %w", err)
	}
	_, isVoter := cfg.ownVoter()
	switch {
	case hasState:
	case isVoter:
		if err := raft.BootstrapCluster(raftConfig, logStore, stable, snapshots, c.transport, votersConfiguration(cfg.Voters)); err != nil {
			return nil, fmt.Errorf("coordinator: bootstrap: %w", err)
		}
		logger.Info("coordinator: bootstrapped the voter set", "node", cfg.NodeID, "voters", cfg.Voters)
	case len(cfg.Voters) == 0 && cfg.Bootstrap:
		configuration := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       raftConfig.LocalID,
			Address:  c.transport.LocalAddr(),
		}}}
		if err := raft.BootstrapCluster(raftConfig, logStore, stable, snapshots, c.transport, configuration); err != nil {
			return nil, fmt.Errorf("coordinator: bootstrap: %w", err)
		}
		logger.Info("coordinator: bootstrapped a one-voter cluster", "node", cfg.NodeID, "raft_address", c.transport.LocalAddr())
	}

	c.raft, err = raft.NewRaft(raftConfig, c.fsm, logStore, stable, snapshots, c.transport)
	if err != nil {
		return nil, fmt.Errorf("coordinator: start raft: %w", err)
	}
	close(c.raftStarted)
	c.observer = raft.NewObserver(c.observations, false, func(o *raft.Observation) bool {
		_, isLeaderChange := o.Data.(raft.LeaderObservation)
		if isLeaderChange {
			c.metrics.leaderChanges.Inc()
		}
		return isLeaderChange
	})
	c.raft.RegisterObserver(c.observer)
	go c.runLeadership()
	go c.runOffsetBatcher()
	go c.runLiveness()
	// From here on Close undoes everything.
	cleanups = nil

	if hasState || cfg.Bootstrap || len(cfg.Voters) > 0 {
		if err := c.start(ctx); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	return c, nil
}

// start joins (a non-voter), waits for a caught-up controller, catches up
// with it and checks the cluster id.
func (c *Coordinator) start(ctx context.Context) error {
	if c.config.isNonVoter() {
		if err := c.join(ctx); err != nil {
			return err
		}
	}
	if err := c.WaitLeader(ctx); err != nil {
		return err
	}
	if err := c.catchUp(ctx); err != nil {
		return err
	}
	return c.checkClusterID()
}

// WaitLeader blocks until the cluster has a controller that has caught up
// with the log and a cluster id exists, ctx ends (ErrTimeout), or the
// Coordinator closes (ErrClosed). A new controller publishes its id only
// after it has applied every entry committed before it took over.
func (c *Coordinator) WaitLeader(ctx context.Context) error {
	err := c.view.waitFor(ctx, c.stop, func(m *Metadata) bool {
		return m.ControllerID >= 0 && m.ClusterID != ""
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: waiting for a controller: %w", ErrTimeout, err)
	}
	return err
}

// Close stops Raft, the leadership goroutine and every subscription, then
// closes the transport and the log. It must not be called from a Subscribe
// callback. Calling it again returns the first result.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		c.raft.DeregisterObserver(c.observer)
		close(c.stop)
		c.cancelClosing()
		if err := c.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: shut down raft: %w", err))
		}
		<-c.leadershipDone
		<-c.offsetBatcherDone
		<-c.livenessDone
		c.closeReadBarrier()
		c.stopSession()
		c.view.cancelAll()
		if err := c.transport.Close(); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: close raft transport: %w", err))
		}
		c.stream.Close() // closed by the transport already; this waits for its goroutines
		c.forwarder.close()
		if err := c.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: close raft log: %w", err))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Metadata returns the latest published snapshot. It is cheap (one atomic
// load) and the result must not be modified.
func (c *Coordinator) Metadata() *Metadata {
	return c.view.current.Load()
}

// Subscribe calls fn with (previous, latest) snapshot pairs after changes are
// applied, until cancel is called or the Coordinator closes.
//
// Each subscription has its own goroutine, so fn runs neither on Raft's
// apply goroutine nor concurrently with itself, and a slow fn delays no one
// else. Calls are in order and chained: every call's old is the previous
// call's new. The first call has old = an empty cluster (no brokers, no
// topics, Version 0) and new = the current snapshot. Changes applied while fn
// runs are merged into the next call, so fn must diff old against new rather
// than count calls; compare Topic.ID, not just names, to notice a topic that
// was deleted and re-created in between. A change of controller alone also
// produces a call (same Version, different ControllerID).
//
// cancel waits for a running fn to return; calling it from inside fn
// deadlocks. After Close, Subscribe calls nothing and cancel does nothing.
func (c *Coordinator) Subscribe(fn func(old, new *Metadata)) (cancel func()) {
	return c.view.subscribe(fn)
}

// IsLeader reports whether this node is the Raft leader and has caught up
// with the log, i.e. whether it may accept metadata changes.
func (c *Coordinator) IsLeader() bool {
	return c.raft.State() == raft.Leader && c.Metadata().ControllerID == c.config.NodeID
}

// NodeID is this node's id.
func (c *Coordinator) NodeID() int32 { return c.config.NodeID }

// RaftAddress is the address the Raft transport advertises (with an
// ephemeral port resolved).
func (c *Coordinator) RaftAddress() string { return string(c.transport.LocalAddr()) }

// Snapshot makes Raft snapshot the state machine now and truncate its log
// (keeping Config.TrailingLogs entries). It does nothing if no entry was
// applied since the last snapshot.
func (c *Coordinator) Snapshot() error {
	err := c.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("coordinator: snapshot: %w", mapRaftError(err))
	}
	return nil
}
