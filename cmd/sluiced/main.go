// Command sluiced is the sluice broker daemon. Every flag can also be set through an environment
// variable named SLUICE_ and the flag's name in upper case with dashes as underscores
// (--data-dir: SLUICE_DATA_DIR); a flag on the command line wins over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/console"
	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/replication"
	"github.com/sluice-mq/sluice/segment"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "sluiced:", err)
		os.Exit(2)
	}
}

type options struct {
	broker     broker.Config
	voters     string
	http       string
	logLevel   string
	logFormat  string
	flush      string
	replicaAck string
	// otlpEndpoint and traceSampling turn on request tracing (tracing.go).
	otlpEndpoint  string
	traceSampling float64
	ui            console.Config
	listeners     listenerFlags
}

func parseFlags(args []string, output io.Writer) (options, error) {
	cfg := broker.DefaultConfig()
	opts := options{broker: cfg}
	fs := flag.NewFlagSet("sluiced", flag.ContinueOnError)
	// The flag package prints the whole usage on any error; a bad flag gets one line instead
	// (the returned error), and the usage goes out only for --help.
	fs.SetOutput(io.Discard)
	b := &opts.broker
	var nodeID int
	var partitions, replicationFactor int
	var maxMessageBytes int
	var retentionBytes int64
	fs.StringVar(&b.DataDir, "data-dir", cfg.DataDir, "directory for partition logs (and metadata, without --metadata-dir)")
	fs.StringVar(&b.MetadataDir, "metadata-dir", "", "directory for the metadata: Raft log, snapshots, cluster id (default: DATA-DIR/meta); a disk of its own keeps Raft's fsyncs from waiting behind the logs' writes")
	fs.StringVar(&b.Listen, "listen", cfg.Listen, "Kafka listener address (host:port): one PLAINTEXT listener; see --listeners for several")
	fs.StringVar(&b.Advertise, "advertise", "", "address given to clients in metadata (host:port); default: the listener's")
	fs.StringVar(&b.RaftListen, "raft-listen", cfg.RaftListen, "metadata Raft transport address (host:port, port 0 picks one)")
	fs.StringVar(&opts.http, "http", "127.0.0.1:9644", "HTTP listener for /metrics, /healthz, /readyz, /debug/pprof and the web console /ui (empty: off)")
	fs.IntVar(&nodeID, "node-id", int(cfg.NodeID), "this broker's node id")
	fs.IntVar(&partitions, "default-partitions", int(cfg.DefaultPartitions), "partitions of auto-created topics and of CreateTopics asking for -1")
	fs.IntVar(&replicationFactor, "default-replication-factor", int(cfg.DefaultReplicationFactor), "replication factor of auto-created topics and of CreateTopics asking for -1")
	fs.BoolVar(&b.AutoCreateTopics, "auto-create-topics", cfg.AutoCreateTopics, "create unknown topics named in metadata requests")
	fs.IntVar(&maxMessageBytes, "max-message-bytes", int(cfg.MaxMessageBytes), "default max.message.bytes: largest record batch accepted")
	fs.Int64Var(&b.Log.SegmentBytes, "segment-bytes", cfg.Log.SegmentBytes, "default segment.bytes: segment file size (preallocated)")
	fs.Int64Var(&b.Log.TailCacheBytes, "log-tail-cache-bytes", cfg.Log.TailCacheBytes, "page cache each active segment keeps behind its written-back end; older pages are dropped (0: the kernel decides)")
	fs.DurationVar(&b.Log.SegmentAge, "segment-age", cfg.Log.SegmentAge, "default segment.ms: roll a segment this old")
	fs.DurationVar(&b.Log.RetentionTime, "retention", cfg.Log.RetentionTime, "default retention.ms as a duration (negative: keep forever)")
	fs.Int64Var(&retentionBytes, "retention-bytes", cfg.Log.RetentionBytes, "default retention.bytes per partition (-1: no limit)")
	fs.DurationVar(&b.RetentionCheckInterval, "retention-check-interval", cfg.RetentionCheckInterval, "how often retention runs")
	fs.Int64Var(&b.Cleaner.IOBytesPerSecond, "cleaner-io-bytes-per-second", cfg.Cleaner.IOBytesPerSecond, "log cleaner's disk I/O limit, reads and writes together (0: none)")
	fs.Int64Var(&b.Cleaner.KeyMapBytes, "cleaner-key-map-bytes", cfg.Cleaner.KeyMapBytes, "log cleaner's key map memory (24 bytes a key); more distinct keys take several passes")
	fs.DurationVar(&b.Cleaner.Interval, "cleaner-interval", cfg.Cleaner.Interval, "how often the log cleaner looks for compacted logs to clean")
	fs.DurationVar(&b.Transactions.MaxTimeout, "transaction-max-timeout", cfg.Transactions.MaxTimeout,
		"the longest transaction.timeout.ms a transactional producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&b.Transactions.CheckInterval, "transaction-check-interval", cfg.Transactions.CheckInterval,
		"how often the transaction coordinator aborts transactions past their timeout")
	fs.StringVar(&opts.flush, "flush", cfg.Log.Flush.String(), "flush policy: os (kernel writeback; acks=all still fsyncs), append (group commit after appends) or interval")
	fs.DurationVar(&b.Log.FlushInterval, "flush-interval", cfg.Log.FlushInterval, "fsync period for --flush=interval")
	fs.StringVar(&opts.voters, "controller-voters", "", "the cluster's Raft voters as id@host:port,... (Kafka's controller.quorum.voters); empty: a one-node cluster")
	fs.DurationVar(&b.BrokerSessionTimeout, "broker-session-timeout", cfg.BrokerSessionTimeout, "a broker silent this long to the controller is fenced and its partitions led elsewhere")
	fs.DurationVar(&b.LeaderRebalanceInterval, "leader-rebalance-interval", cfg.LeaderRebalanceInterval, "how often leadership moves back to preferred replicas that are in sync again (auto.leader.rebalance); 0: never")
	fs.DurationVar(&b.BrokerHeartbeatInterval, "broker-heartbeat-interval", cfg.BrokerHeartbeatInterval, "how often a broker heartbeats to the controller")
	fs.StringVar(&opts.replicaAck, "replica-ack", cfg.Replication.AckMode.String(), "what acks=all waits for on each in-sync replica: fsync (on disk) or memory (in the log, as Kafka)")
	fs.DurationVar(&b.Replication.FetchMaxWait, "replica-fetch-wait-max", cfg.Replication.FetchMaxWait, "replica.fetch.wait.max.ms: how long a follower's fetch may wait at the leader for new data (below --replica-lag-time-max)")
	fs.DurationVar(&b.Replication.LeaderUnreachableAfter, "replica-leader-unreachable", cfg.Replication.LeaderUnreachableAfter, "a follower with no answer from its leader for the fetch wait plus this reports it, and the controller may move leadership to the followers (0: off)")
	fs.DurationVar(&b.Replication.LagTimeMax, "replica-lag-time-max", cfg.Replication.LagTimeMax, "replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR")
	fs.IntVar(&b.MaxConnections, "max-connections", cfg.MaxConnections, "max.connections: client connections past this are closed at once (0: no bound but the open file limit)")
	fs.Int64Var(&b.MaxBufferedInputBytes, "max-buffered-input-bytes", cfg.MaxBufferedInputBytes, "request bytes received and not yet handled, over all connections; past it the connection holding the most is closed")
	fs.Int64Var(&b.MaxBufferedOutputBytes, "max-buffered-output-bytes", cfg.MaxBufferedOutputBytes, "response bytes waiting for slow readers, over all connections; past it the connection holding the most is closed")
	fs.DurationVar(&b.ConnectionsMaxIdle, "connections-max-idle", cfg.ConnectionsMaxIdle, "connections.max.idle.ms as a duration: close connections idle this long (0: never)")
	fs.DurationVar(&b.RequestReceiveTimeout, "request-receive-timeout", cfg.RequestReceiveTimeout, "close a connection whose request has been partially received this long (0: never)")
	fs.IntVar(&b.MetricsMaxTopics, "metrics-max-topics", cfg.MetricsMaxTopics, "topics with series of their own on /metrics (per topic and per partition); the traffic of further topics counts under topic=\"__other\"")
	fs.IntVar(&b.MaxFrameBytes, "max-request-bytes", cfg.MaxFrameBytes, "largest request accepted; larger ones close the connection")
	fs.DurationVar(&b.RequestTiming.SlowRequest, "slow-request", cfg.RequestTiming.SlowRequest, "log one line with the stage timings of each request slower than this, receipt to last response byte (rate-limited; 0: off)")
	fs.StringVar(&opts.otlpEndpoint, "otlp-endpoint", "", "OpenTelemetry collector for request traces (OTLP/HTTP): host:port or http(s)://host:port[/path], path /v1/traces by default; empty: tracing off")
	fs.Float64Var(&opts.traceSampling, "trace-sampling", 0.01, "fraction of requests traced when --otlp-endpoint is set, 0 to 1")
	opts.ui = console.DefaultConfig()
	fs.BoolVar(&opts.ui.Writes, "ui-writes", false, "let the web console (/ui on --http) create and delete topics, reset offsets and delete groups")
	fs.DurationVar(&opts.ui.SampleInterval, "ui-sample-interval", opts.ui.SampleInterval, "how often the web console samples offsets for its throughput and lag charts")
	fs.StringVar(&opts.ui.SamplerUser, "ui-sasl-user", "", "on a SASL listener: the user the web console's chart sampler authenticates as (needs DESCRIBE on what it charts); empty: no charts (pages still work, as each logged-in user)")
	fs.StringVar(&opts.ui.SamplerPassword, "ui-sasl-password", "", "password of --ui-sasl-user")
	opts.listeners.register(fs)
	fs.StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&opts.logFormat, "log-format", "text", "log format: text or json")
	finishSecurity := securityFlags(fs, b) // security_flags.go
	usage := func() {
		fmt.Fprintf(output, "Usage: sluiced [flags]\n\nsluice broker: serves the Kafka protocol. Each flag may also be set as SLUICE_<FLAG> in the\nenvironment (for example SLUICE_DATA_DIR=/var/lib/sluice).\n\nFlags:\n")
		fs.SetOutput(output)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	// Environment first, so command-line flags override it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if value, ok := os.LookupEnv(name); ok && envErr == nil {
			if err := f.Value.Set(value); err != nil {
				envErr = fmt.Errorf("environment %s=%q: %w", name, value, err)
			}
		}
	})
	if envErr != nil {
		return opts, envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return opts, err
		}
		return opts, fmt.Errorf("%w (see sluiced --help)", err)
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if nodeID < 0 || nodeID > 1<<31-1 {
		return opts, fmt.Errorf("--node-id %d out of range", nodeID)
	}
	b.NodeID = int32(nodeID)
	b.DefaultPartitions, b.DefaultReplicationFactor = int32(partitions), int16(replicationFactor)
	if partitions > 1<<31-1 || replicationFactor > 1<<15-1 || maxMessageBytes > 1<<31-1 {
		return opts, errors.New("--default-partitions, --default-replication-factor or --max-message-bytes out of range")
	}
	b.MaxMessageBytes = int32(maxMessageBytes)
	b.Log.RetentionBytes = retentionBytes
	if b.Log.RetentionTime < 0 {
		b.Log.RetentionTime = -1
	}
	policy, err := segment.ParseFlushPolicy(opts.flush)
	if err != nil {
		return opts, fmt.Errorf("--flush: %w", err)
	}
	b.Log.Flush = policy
	if b.Replication.AckMode, err = replication.ParseAckMode(opts.replicaAck); err != nil {
		return opts, fmt.Errorf("--replica-ack: %w", err)
	}
	if b.ControllerVoters, err = coordinator.ParseVoters(opts.voters); err != nil {
		return opts, fmt.Errorf("--controller-voters: %w", err)
	}
	raftListenSet := false
	fs.Visit(func(f *flag.Flag) { raftListenSet = raftListenSet || f.Name == "raft-listen" })
	if _, set := os.LookupEnv("SLUICE_RAFT_LISTEN"); set {
		raftListenSet = true
	}
	for _, voter := range b.ControllerVoters {
		if voter.NodeID == b.NodeID && !raftListenSet {
			b.RaftListen = voter.RaftAddress // the voter's own entry says where it listens
		}
	}
	if err := finishSecurity(); err != nil {
		return opts, err
	}
	if err := checkTracingFlags(opts); err != nil {
		return opts, err
	}
	if err := opts.listeners.apply(b); err != nil {
		return opts, err
	}
	if err := b.Validate(); err != nil {
		return opts, err
	}
	return opts, nil
}

func newLogger(opts options, output io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(opts.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	handlerOptions := &slog.HandlerOptions{Level: level}
	switch opts.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(output, handlerOptions)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(output, handlerOptions)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", opts.logFormat)
}

func run(args []string, output io.Writer) error {
	opts, err := parseFlags(args, output)
	if err != nil {
		return err
	}
	logger, err := newLogger(opts, output)
	if err != nil {
		return err
	}
	set := metrics.NewSet()
	opts.broker.Metrics = set
	opts.broker.Logger = logger
	applyTestHooks(&opts)
	fileLimit := raiseFileLimit(logger)
	setMemoryLimit(logger, opts.broker)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var ready atomic.Bool
	var httpServer *http.Server
	var ui console.Lazy // serves 503 until the broker is up
	if opts.http != "" {
		listener, err := net.Listen("tcp", opts.http)
		if err != nil {
			return fmt.Errorf("--http %s: %w", opts.http, err)
		}
		httpServer = &http.Server{Handler: httpHandler(set, &ready, &ui), ReadHeaderTimeout: 10 * time.Second}
		go httpServer.Serve(listener)
		logger.Info("http serving", "address", listener.Addr().String())
	}
	stopTracing, err := startTracing(ctx, &opts, logger)
	if err != nil {
		return err
	}
	stopTLS, err := opts.listeners.startTLS(ctx, &opts.broker, logger, set)
	if err != nil {
		return err
	}
	defer stopTLS()
	startCtx, cancelStart := context.WithTimeout(ctx, time.Minute)
	b, err := broker.Start(startCtx, opts.broker)
	cancelStart()
	if err != nil {
		return err
	}
	set.RegisterMetricsWriter(b.WriteMetrics)
	warnIfFileLimitLow(logger, fileLimit, b.PartitionsHeld(), opts.broker.MaxConnections)
	web, err := startConsole(opts, b, logger, &ui)
	if err != nil {
		b.Close(context.Background())
		return err
	}
	ready.Store(true)
	var listenerErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case <-b.ListenerFailed():
		// Up but deaf is the worst state for a broker: clients and orchestrators would keep
		// sending it work. Report not ready and exit non-zero so it gets restarted.
		listenerErr = fmt.Errorf("kafka listener failed: %w", b.ListenerFailure())
		logger.Error("shutting down: the Kafka listener can no longer accept connections", "err", b.ListenerFailure())
	}
	ready.Store(false)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if web != nil {
		ui.Set(nil)
		web.Close()
	}
	err = b.Close(shutdownCtx)
	stopTracing(shutdownCtx)
	if httpServer != nil {
		httpServer.Shutdown(shutdownCtx)
	}
	if listenerErr != nil {
		return errors.Join(listenerErr, err)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped cleanly")
	return nil
}

func httpHandler(set *metrics.Set, ready *atomic.Bool, ui http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ui", ui) // the web console (package console)
	mux.Handle("/ui/", ui)
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		writeExposition(w, set) // metrics_exposition.go: with HELP and TYPE for promtool and Prometheus
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
