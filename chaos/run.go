package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/chaos/checker"
	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/nemesis"
	"github.com/sluice-mq/sluice/chaos/netproxy"
	"github.com/sluice-mq/sluice/localcluster"
)

// FsyncFailEnv names the sluiced test hook's environment variable: while the file it names exists,
// every log fsync of that node fails (cmd/sluiced/test_hooks.go).
const FsyncFailEnv = "SLUICE_TEST_FSYNC_FAIL_FILE"

// Config describes one run.
type Config struct {
	// Binary is the sluiced executable; Dir the result folder (created).
	Binary, Dir string
	// Seed draws the schedule and the workload's choices; Duration is the faulty part of the run.
	Seed     uint64
	Duration time.Duration
	Nodes    int
	// Kinds of fault to draw from; Schedule, if set, replaces the drawn schedule.
	Kinds    []nemesis.Kind
	Schedule []nemesis.Fault
	// Warmup, Gap and FaultTime shape the schedule (see nemesis.ScheduleConfig).
	Warmup, Gap, FaultTime time.Duration

	Topic      string
	Partitions int
	Group      string
	Producers  int // half idempotent, half not
	Rate       int // records per second per producer
	Readers    int
	Members    int
	// MemberLifetime: members leave after about this long and others join (0: they stay).
	MemberLifetime time.Duration
	AdminChurn     bool

	// NodeArgs are extra sluiced flags for every node; NodeEnv extra environment.
	NodeArgs []string
	NodeEnv  []string
	// DiskBytes is the size of each node's tmpfs when disk-full faults are drawn.
	DiskBytes int64
	// UnavailableLimit: see checker.Options.
	UnavailableLimit time.Duration
	// Out receives progress lines.
	Out io.Writer
}

// DefaultConfig is `make chaos`'s run, without Binary and Dir.
func DefaultConfig() Config {
	return Config{
		Seed: uint64(time.Now().UnixNano()), Duration: 10 * time.Minute, Nodes: 3, Kinds: nemesis.AllKinds,
		Warmup: 5 * time.Second, Gap: 4 * time.Second, FaultTime: 10 * time.Second,
		Topic: "chaos", Partitions: 6, Group: "chaos-group", Producers: 4, Rate: 50, Readers: 1, Members: 2,
		MemberLifetime: 40 * time.Second, AdminChurn: true,
		NodeArgs:  []string{"--replica-lag-time-max", "2s", "--replica-leader-unreachable", "1s", "--segment-bytes", strconv.Itoa(1 << 20)},
		DiskBytes: 256 << 20, UnavailableLimit: 3 * time.Second, Out: io.Discard,
	}
}

// Result is what a run found.
type Result struct {
	Seed     uint64          `json:"seed"`
	Schedule []nemesis.Fault `json:"schedule"`
	Skipped  []string        `json:"skipped,omitempty"` // fault kinds not available here, and why
	Verdict  checker.Verdict `json:"verdict"`
	Errors   []string        `json:"errors,omitempty"` // the run's own troubles (not anomalies)
}

// Run starts a cluster behind fault proxies, runs the workload under the schedule, heals, reads
// everything back, stops the nodes, digests their replicas and checks the history. The history
// (history.jsonl), the verdict (verdict.json, verdict.txt), the timeline (timeline.svg) and the
// nodes' logs (cluster.log) go into Dir.
func Run(ctx context.Context, cfg Config) (Result, error) {
	result := Result{Seed: cfg.Seed}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return result, fmt.Errorf("chaos: %w", err)
	}
	logs, err := os.Create(filepath.Join(cfg.Dir, "cluster.log"))
	if err != nil {
		return result, fmt.Errorf("chaos: %w", err)
	}
	defer logs.Close()
	recorder, err := history.NewRecorder(filepath.Join(cfg.Dir, "history.jsonl"))
	if err != nil {
		return result, err
	}
	defer recorder.Close()
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}

	env, err := prepareCluster(cfg, logs)
	if err != nil {
		return result, err
	}
	defer env.close()
	kinds := slices.Clone(cfg.Kinds)
	for _, kind := range cfg.Kinds {
		if ok, why := env.nemesis(recorder, cfg, out).Available(kind); !ok {
			result.Skipped = append(result.Skipped, fmt.Sprintf("%s: %s", kind, why))
			kinds = slices.DeleteFunc(kinds, func(k nemesis.Kind) bool { return k == kind })
		}
	}
	result.Schedule = cfg.Schedule
	if result.Schedule == nil {
		result.Schedule = nemesis.Schedule(nemesis.ScheduleConfig{Seed: cfg.Seed, Duration: cfg.Duration, Nodes: cfg.Nodes,
			Clients: cfg.Producers, Kinds: kinds, Warmup: cfg.Warmup, Gap: cfg.Gap, FaultTime: cfg.FaultTime})
	}
	fmt.Fprintf(out, "chaos: seed %d, %d nodes, %v, results in %s\n", cfg.Seed, cfg.Nodes, cfg.Duration, cfg.Dir)
	for _, s := range result.Skipped {
		fmt.Fprintf(out, "chaos: fault not available: %s\n", s)
	}
	fmt.Fprintf(out, "chaos: schedule (%d faults):\n", len(result.Schedule))
	for _, f := range result.Schedule {
		fmt.Fprintf(out, "  %s\n", f)
	}

	if err := env.cluster.StartAll(); err != nil {
		return result, err
	}
	admin, err := newClient(env.cluster.Bootstrap(), 250)
	if err != nil {
		return result, err
	}
	defer admin.Close()
	setupCtx, cancelSetup := context.WithTimeout(ctx, 60*time.Second)
	err = createTopic(setupCtx, admin, cfg.Topic, int32(cfg.Partitions), int16(min(3, cfg.Nodes)), map[string]string{"min.insync.replicas": strconv.Itoa(min(2, cfg.Nodes))})
	if err == nil {
		err = awaitInSync(setupCtx, admin, cfg.Topic, int32(cfg.Partitions))
	}
	cancelSetup()
	if err != nil {
		return result, err
	}

	recorder.Record(history.Event{Process: "runner", F: history.Phase, Detail: "faults"})
	w := &workload{config: cfg, bootstrap: env.cluster.Bootstrap(), recorder: recorder, topic: cfg.Topic}
	if err := w.start(); err != nil {
		return result, err
	}
	nem := env.nemesis(recorder, cfg, out)
	nem.SetAwaitHealthy(func(ctx context.Context) error { return awaitInSync(ctx, admin, cfg.Topic, int32(cfg.Partitions)) })
	faultCtx, cancelFaults := context.WithTimeout(ctx, cfg.Duration)
	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	progress.Add(1)
	go func() {
		defer progress.Done()
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-progressDone:
				return
			case <-tick.C:
				fmt.Fprintf(out, "chaos: %v: %d acknowledged, %d failed sends\n", time.Since(recorder.Start()).Round(time.Second), w.acked.Load(), w.failed.Load())
			}
		}
	}()
	if err := nem.Run(faultCtx, recorder.Start(), result.Schedule); err != nil {
		result.Errors = append(result.Errors, err.Error())
	}
	<-faultCtx.Done()
	cancelFaults()

	recorder.Record(history.Event{Process: "runner", F: history.Phase, Detail: "heal"})
	fmt.Fprintf(out, "chaos: healing\n")
	if err := nem.Heal(); err != nil {
		result.Errors = append(result.Errors, err.Error())
	}
	healCtx, cancelHeal := context.WithTimeout(context.Background(), 120*time.Second)
	if err := awaitInSync(healCtx, admin, cfg.Topic, int32(cfg.Partitions)); err != nil {
		result.Errors = append(result.Errors, "after healing: "+err.Error())
	}
	cancelHeal()
	w.stopProducers()
	close(progressDone)
	progress.Wait()

	recorder.Record(history.Event{Process: "runner", F: history.Phase, Detail: "final"})
	fmt.Fprintf(out, "chaos: reading everything back\n")
	if err := finalRead(env.cluster.Bootstrap(), recorder, cfg); err != nil {
		result.Errors = append(result.Errors, err.Error())
	}
	if err := groupDrain(env.cluster.Bootstrap(), recorder, cfg); err != nil {
		result.Errors = append(result.Errors, err.Error())
	}
	w.stop()
	for _, err := range w.errs {
		result.Errors = append(result.Errors, err.Error())
	}
	fmt.Fprintf(out, "chaos: stopping the nodes and comparing replicas\n")
	if err := digestReplicas(env.cluster, recorder, cfg); err != nil {
		result.Errors = append(result.Errors, err.Error())
	}
	if err := recorder.Close(); err != nil {
		result.Errors = append(result.Errors, err.Error())
	}

	events, err := readHistory(filepath.Join(cfg.Dir, "history.jsonl"))
	if err != nil {
		result.Errors = append(result.Errors, err.Error())
	}
	result.Verdict = checker.Check(events, checker.Options{Nodes: cfg.Nodes, Topic: cfg.Topic, UnavailableLimit: cfg.UnavailableLimit})
	return result, writeResults(cfg.Dir, result, events)
}

// readHistory reads a run's history back from its file.
func readHistory(path string) ([]history.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	defer f.Close()
	return history.Read(f)
}

func writeResults(dir string, result Result, events []history.Event) error {
	raw, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		return err
	}
	var errs []error
	errs = append(errs, os.WriteFile(filepath.Join(dir, "verdict.json"), raw, 0o644))
	summary, err := os.Create(filepath.Join(dir, "verdict.txt"))
	if err == nil {
		result.WriteSummary(summary)
		errs = append(errs, summary.Close())
	}
	chart, err := os.Create(filepath.Join(dir, "timeline.svg"))
	if err == nil {
		errs = append(errs, WriteTimeline(chart, events), chart.Close())
	}
	return errors.Join(errs...)
}

// WriteSummary prints the seed, the schedule's size, the run's errors and the verdict.
func (r Result) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "seed %d; %d faults scheduled\n", r.Seed, len(r.Schedule))
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "fault not available: %s\n", s)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "run error: %s\n", e)
	}
	r.Verdict.WriteSummary(w)
}

// environment is the cluster, its proxies and its disks.
type environment struct {
	cluster *localcluster.Cluster
	network *netproxy.Network
	mounts  []string
	fsync   map[int32]string
	disks   map[int32]string
	awaitFn func(context.Context) error
}

func prepareCluster(cfg Config, logs io.Writer) (*environment, error) {
	c, err := localcluster.New(localcluster.Config{Binary: cfg.Binary, Dir: filepath.Join(cfg.Dir, "nodes"), Nodes: cfg.Nodes,
		Args: cfg.NodeArgs, Logs: logs, StartTimeout: 90 * time.Second})
	if err != nil {
		return nil, err
	}
	env := &environment{cluster: c, fsync: map[int32]string{}, disks: map[int32]string{}}
	env.network = netproxy.New(netproxy.IdentifyByProcess(func() map[int32]int {
		pids := map[int32]int{}
		for _, n := range c.Nodes {
			pids[n.ID] = n.PID()
		}
		return pids
	}))
	useDisks := slices.Contains(cfg.Kinds, nemesis.DiskFull) && len(cfg.Schedule) == 0
	for _, n := range c.Nodes {
		kafka, err := env.network.Listen(netproxy.NodePeer(n.ID), netproxy.Kafka, n.Kafka)
		if err != nil {
			env.close()
			return nil, err
		}
		raft, err := env.network.Listen(netproxy.NodePeer(n.ID), netproxy.Raft, n.Raft)
		if err != nil {
			env.close()
			return nil, err
		}
		n.KafkaAdvertise, n.RaftAdvertise = kafka.Addr(), raft.Addr()
		env.fsync[n.ID] = filepath.Join(cfg.Dir, fmt.Sprintf("fsync-fail-node%d", n.ID))
		n.Env = append(slices.Clone(cfg.NodeEnv), FsyncFailEnv+"="+env.fsync[n.ID])
		if useDisks {
			if err := os.MkdirAll(n.DataDir, 0o755); err == nil {
				if err := unix.Mount("tmpfs", n.DataDir, "tmpfs", 0, fmt.Sprintf("size=%d", cfg.DiskBytes)); err == nil {
					env.mounts = append(env.mounts, n.DataDir)
					env.disks[n.ID] = n.DataDir
				}
			}
		}
	}
	if len(env.disks) != len(c.Nodes) {
		env.disks = map[int32]string{}
	}
	return env, nil
}

func (env *environment) nemesis(recorder *history.Recorder, cfg Config, out io.Writer) *nemesis.Nemesis {
	return nemesis.New(nemesis.Config{Cluster: env.cluster, Network: env.network, Recorder: recorder, Topic: cfg.Topic,
		FsyncFailFile: func(node int32) string { return env.fsync[node] },
		DiskDir:       func(node int32) string { return env.disks[node] },
		Log:           out})
}

func (env *environment) close() {
	env.cluster.Close()
	env.network.Close()
	for _, m := range env.mounts {
		unix.Unmount(m, unix.MNT_DETACH)
	}
}
