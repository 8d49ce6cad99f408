package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := listener.Addr().String()
	listener.Close()
	return address
}

func TestHelpExplainsEveryCommand(t *testing.T) {
	commands := [][]string{
		{"--help"}, {"topic", "--help"}, {"topic", "create", "--help"}, {"topic", "list", "--help"},
		{"topic", "describe", "--help"}, {"topic", "delete", "--help"}, {"topic", "alter", "--help"},
		{"produce", "--help"}, {"consume", "--help"}, {"group", "--help"}, {"group", "list", "--help"},
		{"group", "describe", "--help"}, {"group", "reset-offsets", "--help"}, {"group", "delete", "--help"},
		{"cluster", "--help"}, {"cluster", "status", "--help"}, {"cluster", "elect-leaders", "--help"}, {"bench", "--help"}, {"bench", "run", "--help"},
		{"bench", "agent", "--help"}, {"txn", "--help"}, {"txn", "list", "--help"}, {"txn", "describe", "--help"},
		{"acl", "--help"}, {"acl", "create", "--help"}, {"acl", "list", "--help"}, {"acl", "delete", "--help"},
		{"user", "--help"}, {"user", "create", "--help"}, {"user", "list", "--help"}, {"user", "delete", "--help"},
	}
	for _, args := range commands {
		r := sluice(t, "127.0.0.1:1", nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage: sluice") || r.stderr != "" {
			t.Errorf("sluice %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if r := sluice(t, "127.0.0.1:1", nil, "produce", "--help"); !strings.Contains(r.stdout, "--acks") {
		t.Errorf("produce --help does not list its flags:\n%s", r.stdout)
	}
}

// failsInOneLine checks that r is a failure with exit code want and a single stderr line holding
// every fragment.
func failsInOneLine(t *testing.T, what string, r result, want int, fragments ...string) {
	t.Helper()
	line := strings.TrimSuffix(r.stderr, "\n")
	if r.code != want || line == "" || strings.Contains(line, "\n") {
		t.Errorf("%s: exit %d (want %d), stderr %q", what, r.code, want, r.stderr)
		return
	}
	for _, fragment := range fragments {
		if !strings.Contains(line, fragment) {
			t.Errorf("%s: stderr %q lacks %q", what, line, fragment)
		}
	}
}

func TestErrorsAreOneLineWithExitCodes(t *testing.T) {
	down := closedPort(t)
	failsInOneLine(t, "bad flag", sluice(t, down, nil, "topic", "list", "--bogus"), exitUsage, "-bogus", "--help")
	failsInOneLine(t, "bad flag value", sluice(t, down, nil, "topic", "create", "x", "--partitions", "many"), exitUsage, "--help")
	failsInOneLine(t, "unknown command", sluice(t, down, nil, "frobnicate"), exitUsage, "frobnicate")
	failsInOneLine(t, "missing argument", sluice(t, down, nil, "topic", "create"), exitUsage, "NAME")
	failsInOneLine(t, "unreachable broker", sluice(t, down, nil, "topic", "list"), exitFailed, down, "SLUICE_BROKERS")
	failsInOneLine(t, "unreachable broker by flag", sluice(t, "127.0.0.1:9", nil, "--brokers", down, "cluster", "status"), exitFailed, down)

	dir := t.TempDir()
	malformed := filepath.Join(dir, "bad.yaml")
	os.WriteFile(malformed, []byte("partitions: [1, 2\nmessage_size: 100\n"), 0o644)
	failsInOneLine(t, "malformed workload", sluice(t, down, nil, "bench", "--workload", malformed), exitUsage, "bad.yaml")
	invalid := filepath.Join(dir, "invalid.yaml")
	os.WriteFile(invalid, []byte("message_size: 4\nacks: 2\nlinger: soon\n"), 0o644)
	failsInOneLine(t, "invalid workload", sluice(t, down, nil, "bench", "--workload", invalid), exitUsage, "invalid.yaml")
	misspelt := filepath.Join(dir, "misspelt.json")
	os.WriteFile(misspelt, []byte(`{"partitons": 8}`), 0o644)
	failsInOneLine(t, "unknown workload key", sluice(t, down, nil, "bench", "--workload", misspelt), exitUsage, "partitons")
	failsInOneLine(t, "missing workload", sluice(t, down, nil, "bench", "--workload", filepath.Join(dir, "none.yaml")), exitUsage, "none.yaml")

	brokers := startSluiced(t)
	failsInOneLine(t, "describe unknown topic", sluice(t, brokers, nil, "topic", "describe", "nope"), exitNotFound, `"nope" does not exist`)
	failsInOneLine(t, "produce to unknown topic", sluice(t, brokers, strings.NewReader("a\n"), "produce", "nope"), exitNotFound, "sluice topic create nope")
	failsInOneLine(t, "consume unknown topic", sluice(t, brokers, nil, "consume", "nope", "--count", "1"), exitNotFound, "nope")
	failsInOneLine(t, "delete unknown topic", sluice(t, brokers, nil, "topic", "delete", "nope"), exitNotFound, "nope")
	failsInOneLine(t, "describe unknown group", sluice(t, brokers, nil, "group", "describe", "nobody"), exitNotFound, "nobody")
	ok(t, brokers, nil, "topic", "create", "twice")
	failsInOneLine(t, "create existing topic", sluice(t, brokers, nil, "topic", "create", "twice"), exitFailed, "already exists", "--if-not-exists")
	ok(t, brokers, nil, "topic", "create", "twice", "--if-not-exists")
}

// TestTopicLifecycle is the acceptance path: create a topic, produce 10,000 lines, consume
// them back as JSON in a group, see the group's lag, delete the topic.
func TestTopicLifecycle(t *testing.T) {
	brokers := startSluiced(t)
	ok(t, brokers, nil, "topic", "create", "events", "--partitions", "3", "--config", "retention.ms=3600000")
	if r := ok(t, brokers, nil, "topic", "list"); !strings.Contains(r.stdout, "events") || !strings.Contains(r.stdout, "3") {
		t.Fatalf("topic list:\n%s", r.stdout)
	}

	var input strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&input, "key-%d:line %d\n", i%7, i)
	}
	ok(t, brokers, strings.NewReader(input.String()), "produce", "events", "--key-separator", ":", "--acks", "all")

	var described []describedTopic
	if err := json.Unmarshal([]byte(ok(t, brokers, nil, "topic", "describe", "events", "--json").stdout), &described); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range described[0].Partitions {
		total += p.EndOffset - p.StartOffset
	}
	if len(described[0].Partitions) != 3 || total != 10000 || described[0].Configs["retention.ms"] != "3600000" {
		t.Fatalf("describe: %+v", described)
	}

	// Read 4,000 in the group, then look at its lag.
	r := ok(t, brokers, nil, "consume", "events", "--group", "readers", "--from-beginning", "--count", "4000", "--format", "json")
	seen := map[string]bool{}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for _, line := range lines {
		var record jsonRecord
		if err := json.Unmarshal([]byte(line), &record); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		if record.Topic != "events" || record.Key == nil || record.Value == nil || record.Timestamp == "" {
			t.Fatalf("record %q", line)
		}
		seen[*record.Value] = true
	}
	if len(lines) != 4000 || len(seen) != 4000 {
		t.Fatalf("consumed %d lines, %d distinct", len(lines), len(seen))
	}
	var group groupDescription
	if err := json.Unmarshal([]byte(ok(t, brokers, nil, "group", "describe", "readers", "--json").stdout), &group); err != nil {
		t.Fatal(err)
	}
	if group.TotalLag != 6000 {
		t.Fatalf("group lag %d, want 6000: %+v", group.TotalLag, group)
	}
	if r := ok(t, brokers, nil, "group", "describe", "readers"); !strings.Contains(r.stdout, "LAG") || !strings.Contains(r.stdout, "total lag 6000") {
		t.Fatalf("group describe:\n%s", r.stdout)
	}

	// The rest, in the same group: nothing twice, nothing missing.
	r = ok(t, brokers, nil, "consume", "events", "--group", "readers", "--exit-at-end", "--format", "json")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for _, line := range lines {
		var record jsonRecord
		if err := json.Unmarshal([]byte(line), &record); err != nil {
			t.Fatal(err)
		}
		if seen[*record.Value] {
			t.Fatalf("%q consumed twice", *record.Value)
		}
		seen[*record.Value] = true
	}
	if len(seen) != 10000 {
		t.Fatalf("consumed %d distinct records in all, want 10000", len(seen))
	}
	if r := ok(t, brokers, nil, "group", "describe", "readers", "--json"); !strings.Contains(r.stdout, `"total_lag": 0`) {
		t.Fatalf("lag after reading everything:\n%s", r.stdout)
	}

	ok(t, brokers, nil, "group", "reset-offsets", "readers", "--topic", "events", "--to-earliest", "--execute")
	if r := ok(t, brokers, nil, "group", "describe", "readers"); !strings.Contains(r.stdout, "total lag 10000") {
		t.Fatalf("lag after reset:\n%s", r.stdout)
	}
	if r := ok(t, brokers, nil, "cluster", "status"); !strings.Contains(r.stdout, "controller") || !strings.Contains(r.stdout, "events") ||
		!strings.Contains(r.stdout, "0 under-replicated, 0 offline") || !strings.Contains(r.stdout, "alive") {
		t.Fatalf("cluster status:\n%s", r.stdout)
	}
	// One node: every partition is led by its preferred replica already.
	if r := ok(t, brokers, nil, "cluster", "elect-leaders", "events"); !strings.Contains(r.stdout, "ELECTION_NOT_NEEDED") {
		t.Fatalf("cluster elect-leaders events:\n%s", r.stdout)
	}
	if r := ok(t, brokers, nil, "cluster", "elect-leaders", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("cluster elect-leaders (all) on one node:\n%s", r.stdout)
	}
	ok(t, brokers, nil, "group", "delete", "readers")
	ok(t, brokers, nil, "topic", "delete", "events")
	if r := ok(t, brokers, nil, "topic", "list", "--json"); strings.Contains(r.stdout, "events") {
		t.Fatalf("topic still listed after delete:\n%s", r.stdout)
	}
}
