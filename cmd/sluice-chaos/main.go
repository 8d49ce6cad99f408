// Command sluice-chaos attacks a local sluiced cluster with faults while clients produce and
// consume, then checks the recorded history (package chaos). `make chaos` runs it.
//
//	sluice-chaos run --duration 10m [--seed N] [--faults kill,isolate,...] [--out chaos-results]
//	sluice-chaos check RESULT-DIR/history.jsonl [--nodes 3]
//
// Exit codes: 0 the verdict is valid, 1 anomalies were found, 2 the run itself failed or the
// command line is wrong.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/chaos"
	"github.com/sluice-mq/sluice/chaos/checker"
	"github.com/sluice-mq/sluice/chaos/history"
	"github.com/sluice-mq/sluice/chaos/nemesis"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Usage: sluice-chaos run [flags]       run a cluster under faults and check it
       sluice-chaos check HISTORY [flags] check a recorded history again
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runChaos(ctx, args[1:], stdout, stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return 2
}

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := chaos.DefaultConfig()
	fs := flag.NewFlagSet("sluice-chaos run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.String("seed", "", "seed of the schedule and workload (default: from the clock; printed)")
	faults := fs.String("faults", "all", "fault kinds to draw from, comma-separated (all: every kind)")
	out := fs.String("out", "chaos-results", "folder under which the run's result folder is made")
	executable, _ := os.Executable()
	fs.StringVar(&cfg.Binary, "sluiced", filepath.Join(filepath.Dir(executable), "sluiced"), "sluiced binary")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long faults are injected (then heal and check)")
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "cluster size (3 or 5)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic under test")
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "producers (half idempotent)")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "records per second per producer")
	fs.DurationVar(&cfg.FaultTime, "fault-time", cfg.FaultTime, "typical length of a fault")
	fs.DurationVar(&cfg.Gap, "gap", cfg.Gap, "typical healthy time between faults")
	fs.DurationVar(&cfg.UnavailableLimit, "unavailable-limit", cfg.UnavailableLimit, "longest acceptable interval without acknowledged sends while a majority is healthy")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *seed != "" {
		n, err := strconv.ParseUint(*seed, 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "sluice-chaos: --seed %q is not a number\n", *seed)
			return 2
		}
		cfg.Seed = n
	}
	kinds, err := nemesis.ParseKinds(*faults)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-chaos: %v\n", err)
		return 2
	}
	cfg.Kinds = kinds
	cfg.Dir = filepath.Join(*out, fmt.Sprintf("%s-seed-%d", time.Now().Format("20060102-150405"), cfg.Seed))
	cfg.Out = stdout
	result, err := chaos.Run(ctx, cfg)
	fmt.Fprintln(stdout)
	result.WriteSummary(stdout)
	fmt.Fprintf(stdout, "results: %s (history.jsonl, verdict.json, verdict.txt, timeline.svg, cluster.log)\n", cfg.Dir)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-chaos: %v\n", err)
		return 2
	}
	if !result.Verdict.Valid {
		return 1
	}
	return 0
}

func check(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice-chaos check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "cluster size of the run")
	topic := fs.String("topic", "chaos", "topic under test")
	limit := fs.Duration("unavailable-limit", 3*time.Second, "longest acceptable unavailability with a healthy majority")
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	path := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-chaos: %v\n", err)
		return 2
	}
	defer f.Close()
	events, err := history.Read(f)
	if err != nil && len(events) == 0 {
		fmt.Fprintf(stderr, "sluice-chaos: %v\n", err)
		return 2
	}
	if err != nil {
		// A run that died (or still runs) leaves a last line cut short: check what is whole.
		fmt.Fprintf(stderr, "sluice-chaos: %v; checking the %d events before it\n", err, len(events))
	}
	verdict := checker.Check(events, checker.Options{Nodes: *nodes, Topic: *topic, UnavailableLimit: *limit})
	verdict.WriteSummary(stdout)
	if !verdict.Valid {
		return 1
	}
	return 0
}
