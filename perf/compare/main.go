// Command compare prints two folders' `sluice bench` results side by side: for each workload and
// driver found in both, the headline figures of the old and the new run and the change.
//
//	go run ./perf/compare perf/results/OLD perf/results/NEW
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/sluice-mq/sluice/bench"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: compare OLD_DIR NEW_DIR")
		os.Exit(2)
	}
	old, err := load(os.Args[1])
	if err == nil && len(old) == 0 {
		err = fmt.Errorf("no bench result JSON in %s", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	updated, err := load(os.Args[2])
	if err == nil && len(updated) == 0 {
		err = fmt.Errorf("no bench result JSON in %s", os.Args[2])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	keys := make([]string, 0, len(old))
	for k := range old {
		if updated[k] != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		fmt.Fprintln(os.Stderr, "compare: the folders share no workload (same name, driver, acks, message size, rate and agent count)")
		os.Exit(1)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tfigure\told\tnew\tchange\t")
	for _, k := range keys {
		a, b := old[k].Summary, updated[k].Summary
		rows := []struct {
			name     string
			old, new float64
		}{
			{"publish msg/s", a.PublishRate, b.PublishRate},
			{"publish MB/s", a.PublishMBps, b.PublishMBps},
			{"consume msg/s", a.ConsumeRate, b.ConsumeRate},
			{"publish p50 ms", a.PublishLatencyMs.P50, b.PublishLatencyMs.P50},
			{"publish p99 ms", a.PublishLatencyMs.P99, b.PublishLatencyMs.P99},
			{"publish p99.9 ms", a.PublishLatencyMs.P999, b.PublishLatencyMs.P999},
			{"e2e p50 ms", a.EndToEndLatencyMs.P50, b.EndToEndLatencyMs.P50},
			{"e2e p99 ms", a.EndToEndLatencyMs.P99, b.EndToEndLatencyMs.P99},
		}
		for i, r := range rows {
			label := ""
			if i == 0 {
				label = k
			}
			change := "n/a"
			if r.old != 0 {
				change = fmt.Sprintf("%+.1f%%", (r.new-r.old)/r.old*100)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%s\t\n", label, r.name, r.old, r.new, change)
		}
	}
	tw.Flush()
}

// load reads every result JSON in dir, keyed by workload, driver, acks, message size, rate and
// agent count (the latest file wins when several share a key).
func load(dir string) (map[string]*bench.Result, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	out := map[string]*bench.Result{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var r bench.Result
		if json.Unmarshal(data, &r) != nil || r.Workload.Name == "" {
			continue // not a bench result
		}
		out[fmt.Sprintf("%s %s acks=%s %dB rate=%d agents=%d", r.Workload.Name, r.Driver, r.Workload.Acks, r.Workload.MessageSize, r.Workload.Rate, len(r.Agents))] = &r
	}
	return out, nil
}
