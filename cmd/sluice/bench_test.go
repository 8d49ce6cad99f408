package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/bench"
)

var agentLine = regexp.MustCompile(`bench agent listening on (\S+)`)

// TestBenchOverTwoAgents runs a short workload spread over two agents and checks the merged result,
// then the same workload in-process through franz-go. Figures are not asserted (STYLE 16): only
// that the harness measured something and wrote its outputs.
func TestBenchOverTwoAgents(t *testing.T) {
	brokers := startSluiced(t)
	agents := []string{
		waitForLine(t, exec.Command(sluiceBinary, "bench", "agent", "--listen", "127.0.0.1:0"), agentLine),
		waitForLine(t, exec.Command(sluiceBinary, "bench", "agent", "--listen", "127.0.0.1:0"), agentLine),
	}
	dir := t.TempDir()
	workload := filepath.Join(dir, "small.yaml")
	os.WriteFile(workload, []byte("partitions: 4\nmessage_size: 100\nproducers: 2\nrate: 2000\nconsumer_groups: 1\nconsumers_per_group: 2\nwarmup: 0s\n"), 0o644)
	r := ok(t, brokers, nil, "bench", "--workload", workload, "--duration", "2s", "--agents", strings.Join(agents, ","), "--out-dir", dir)
	for _, want := range []string{"publish", "end-to-end", "p99.9", "2 agents", "backlog at end"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "publish") || !strings.Contains(r.stderr, "msg/s") {
		t.Fatalf("no progress lines on stderr:\n%s", r.stderr)
	}
	result := readResult(t, dir, "client")
	if len(result.Agents) != 2 || result.Producers != 2 || result.Consumers != 2 {
		t.Fatalf("merged result: agents %v, %d producers, %d consumers", result.Agents, result.Producers, result.Consumers)
	}
	if result.Published == 0 || result.Consumed == 0 || result.PublishLatency.Count() != uint64(result.Published) ||
		result.EndToEndLatency.Count() != uint64(result.Consumed) || len(result.Timeline) < 2 {
		t.Fatalf("merged result: published %d (latencies %d), consumed %d (latencies %d), %d seconds", result.Published,
			result.PublishLatency.Count(), result.Consumed, result.EndToEndLatency.Count(), len(result.Timeline))
	}

	// The same through franz-go, in this process, with acks=all.
	ok(t, brokers, nil, "bench", "run", "--workload", workload, "--duration", "1s", "--driver", "franz", "--acks", "all", "--out-dir", dir, "--quiet")
	result = readResult(t, dir, "franz")
	if result.Driver != "franz" || result.Published == 0 || result.Consumed == 0 || result.Workload.Acks != "all" {
		t.Fatalf("franz run: driver %s, published %d, consumed %d, acks %s", result.Driver, result.Published, result.Consumed, result.Workload.Acks)
	}
	if r := ok(t, brokers, nil, "topic", "list"); strings.Contains(r.stdout, "bench-") {
		t.Fatalf("bench topics left behind:\n%s", r.stdout)
	}
}

// readResult reads the one result JSON of driver in dir and checks its chart exists.
func readResult(t *testing.T, dir, driver string) *bench.Result {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "*-"+driver+"-*.json"))
	if len(matches) != 1 {
		t.Fatalf("result files for %s: %v", driver, matches)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var result bench.Result
	if err := json.Unmarshal(data, &result); err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(strings.TrimSuffix(matches[0], ".json") + ".svg")
	if err != nil || !strings.HasPrefix(string(chart), "<svg") || !strings.Contains(string(chart), "polyline") {
		t.Fatalf("chart: %v\n%.200s", err, chart)
	}
	return &result
}
