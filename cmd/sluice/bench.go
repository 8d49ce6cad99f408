package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/bench"
)

const benchHelp = `Usage: sluice bench [run] --workload FILE [flags]
       sluice bench agent --listen HOST:PORT

The load harness. "run" (the default) runs a workload file (YAML or JSON; see bench/workloads/)
against the brokers: producers and consumers in this process, or spread over agents with
--agents, whose histograms are merged. It prints a progress line each second and a final table,
and writes the full result as JSON and a chart as SVG to --out-dir.

"agent" serves runs for a coordinator on another host: start one per load host, then
  sluice bench run --workload FILE --agents host1:7070,host2:7070

Run "sluice bench run --help" or "sluice bench agent --help" for the flags.
`

func runBench(ctx context.Context, args []string, io streams) error {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			fmt.Fprint(io.out, benchHelp)
			return nil
		case "run":
			return benchRun(ctx, args[1:], io)
		case "agent":
			return benchAgent(ctx, args[1:], io)
		}
		if !strings.HasPrefix(args[0], "-") {
			return usageErrorf("sluice bench", "unknown subcommand %q (run or agent; see sluice bench --help)", args[0])
		}
	}
	return benchRun(ctx, args, io)
}

func benchRun(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice bench run", "--workload FILE [flags]", `Run a workload against the brokers and report publish and consume throughput, publish and
end-to-end latency percentiles (p50, p99, p99.9, max) and the consumer backlog. Topics are created
fresh for the run and deleted afterwards. Flags given here override the workload file.
Example: sluice bench --workload bench/workloads/1-topic-8-partitions-100b.yaml --duration 20s`)
	workloadPath := fs.String("workload", "", "workload file (YAML or JSON), e.g. bench/workloads/1-topic-8-partitions-100b.yaml")
	duration := fs.Duration("duration", 0, "measured duration (overrides the workload's)")
	warmup := fs.Duration("warmup", -1, "warm-up before measuring (overrides the workload's)")
	driver := fs.String("driver", "client", "client library: client (sluice's client/) or franz (franz-go)")
	agents := fs.String("agents", "", "comma-separated host:port of agents (sluice bench agent) to spread the load over")
	rate := fs.Int("rate", -1, "target messages/s over all producers, 0 for max (overrides the workload's)")
	acks := fs.String("acks", "", "0, 1 or all (overrides the workload's)")
	messageSize := fs.Int("message-size", 0, "message bytes (overrides the workload's)")
	producers := fs.Int("producers", 0, "producers per topic (overrides the workload's)")
	outDir := fs.String("out-dir", "bench-results", "directory for the result JSON and the SVG chart")
	keepTopics := fs.Bool("keep-topics", false, "do not delete the run's topics afterwards")
	quiet := fs.Bool("quiet", false, "no progress line")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of this process (the load generator) for the whole run to FILE (go tool pprof)")
	traceFile := fs.String("trace", "", "write an execution trace of this process (the load generator) for the whole run to FILE (go tool trace); large: tens of MB a minute")
	allocProfile := fs.String("alloc-profile", "", "write this process's allocation profile (the load generator's, whole run) to FILE at the end (go tool pprof -sample_index=alloc_space)")
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	if *workloadPath == "" {
		return usageErrorf(fs.name, "--workload is required (for example bench/workloads/1-topic-8-partitions-100b.yaml)")
	}
	w, err := bench.LoadWorkload(*workloadPath)
	if err != nil {
		return usageErrorf(fs.name, "%v", strings.TrimPrefix(err.Error(), "bench: "))
	}
	if *duration > 0 {
		w.Duration = *duration
	}
	if *warmup >= 0 {
		w.Warmup = *warmup
	}
	if *rate >= 0 {
		w.Rate = *rate
	}
	if *acks != "" {
		w.Acks = *acks
	}
	if *messageSize > 0 {
		w.MessageSize = *messageSize
	}
	if *producers > 0 {
		w.Producers = *producers
	}
	if err := w.Validate(); err != nil {
		return usageErrorf(fs.name, "%v", err)
	}
	if *driver != "client" && *driver != "franz" {
		return usageErrorf(fs.name, "--driver %q: want client or franz", *driver)
	}
	var agentList []string
	for _, a := range strings.Split(*agents, ",") {
		if a = strings.TrimSpace(a); a != "" {
			agentList = append(agentList, a)
		}
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return fmt.Errorf("--out-dir: %w", err)
	}
	// Fail at once, in one line, if the brokers are down (the agents check for themselves).
	s, err := connect(ctx, fs.globals)
	if err != nil {
		return err
	}
	s.Close()

	progress := func(i bench.Interval) {}
	if !*quiet {
		terminal := isTerminal(io.err)
		progress = func(i bench.Interval) {
			if terminal {
				fmt.Fprintf(io.err, "\r\033[K%s", bench.ProgressLine(i))
			} else {
				fmt.Fprintln(io.err, bench.ProgressLine(i))
			}
		}
		defer func() {
			if terminal {
				fmt.Fprintln(io.err)
			}
		}()
	}
	tlsConfig, err := fs.globals.security.tlsConfig()
	if err != nil {
		return usageErrorf(fs.name, "%v", err)
	}
	if *cpuProfile != "" {
		stop, err := startRecording("--cpu-profile", *cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *allocProfile != "" {
		defer writeAllocProfile(*allocProfile, io)
	}
	if *traceFile != "" {
		stop, err := startRecording("--trace", *traceFile, trace.Start, trace.Stop)
		if err != nil {
			return err
		}
		defer stop()
	}
	collectLessOften()
	result, err := bench.Run(ctx, bench.RunOptions{
		Workload: w, Driver: *driver, Brokers: fs.globals.brokerList(), Agents: agentList, KeepTopics: *keepTopics, Progress: progress,
		TLS: tlsConfig,
	})
	if err != nil {
		return err
	}
	stem := filepath.Join(*outDir, fmt.Sprintf("%s-%s-%s", w.Name, *driver, result.Started.Format("20060102-150405")))
	jsonPath, chartPath := stem+".json", stem+".svg"
	if err := writeFileWith(jsonPath, func(f *os.File) error { return writeJSON(f, result) }); err != nil {
		return err
	}
	if err := writeFileWith(chartPath, func(f *os.File) error { return result.WriteChart(f) }); err != nil {
		return err
	}
	if fs.globals.json {
		return writeJSON(io.out, map[string]any{"summary": result.Summary, "result": jsonPath, "chart": chartPath,
			"published": result.Published, "consumed": result.Consumed, "backlog_at_end": result.BacklogAtEnd, "publish_errors": result.PublishErrors})
	}
	result.WriteTable(io.out)
	fmt.Fprintf(io.out, "result %s\nchart  %s\n", jsonPath, chartPath)
	if result.PublishErrors > 0 {
		return fmt.Errorf("%d records failed to publish (see %s)", result.PublishErrors, jsonPath)
	}
	return nil
}

func writeFileWith(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

func benchAgent(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice bench agent", "--listen HOST:PORT [flags]", `Serve benchmark runs for a coordinator ("sluice bench run --agents ..."), one at a time, over
HTTP and JSON. Runs until interrupted. The brokers a run talks to come from the coordinator.`)
	listen := fs.String("listen", "127.0.0.1:7070", "address to serve on (port 0 picks a free one)")
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	collectLessOften()
	agent := bench.NewAgent()
	server := &http.Server{Handler: agent.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	fmt.Fprintf(io.err, "bench agent listening on %s\n", listener.Addr())
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	server.Shutdown(shutdownCtx)
	agent.Close()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loadGCPercent is the load generator's GOGC. It allocates about 200 MB/s at 375,000 msg/s (each
// record's value and client.Record on both sides, the consumer's response frames) over a live heap
// of a few tens of MB, so at Go's default of 100 it collected several times a second, and a
// collection stalls the send loop and the callbacks whose timestamps are the measurement. With 400:
// a 3-node cluster at 375,000 msg/s measured publish p99 9-11 ms instead of 13-24 ms (four 15 s
// runs each), and the generator used 18 % less CPU.
const loadGCPercent = 400

// collectLessOften sets loadGCPercent unless the user set GOGC.
func collectLessOften() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(loadGCPercent)
	}
}

// writeAllocProfile writes the allocations since the start into path; a failure is reported, not
// returned, since the run's result is already out.
func writeAllocProfile(path string, io streams) {
	err := writeFileWith(path, func(f *os.File) error { return pprof.Lookup("allocs").WriteTo(f, 0) })
	if err != nil {
		fmt.Fprintf(io.err, "--alloc-profile: %v\n", err)
	}
}

// startRecording has start write a recording of this process (a CPU profile, an execution trace)
// into path until the returned stop runs; flag names the option in errors.
func startRecording(flag, path string, start func(io.Writer) error, stopRecording func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return func() {
		stopRecording()
		f.Close()
	}, nil
}
