package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// promtool returns the path of promtool (Debian package prometheus). Without it the test is skipped
// with the reason, unless SLUICE_REQUIRE_PROMETHEUS is set (.ci/run sets it after installing the
// package), where a missing promtool fails.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_PROMETHEUS") != "" {
			t.Fatal("promtool is not installed (apt-get install prometheus), and SLUICE_REQUIRE_PROMETHEUS is set")
		}
		t.Skip("promtool is not installed: apt-get install prometheus (.ci/run installs it)")
	}
	return path
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRules checks the rules (promtool check rules) and runs their unit tests (promtool test
// rules), then checks that every alert has a test case that expects it to fire.
func TestAlertRules(t *testing.T) {
	tool := promtool(t)
	run(t, tool, "check", "rules", "prometheus/sluice-alerts.yml")
	run(t, tool, "test", "rules", "prometheus/sluice-alerts.test.yml")
	run(t, tool, "check", "config", "prometheus/prometheus.yml")

	raw, err := os.ReadFile("prometheus/sluice-alerts.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fired := map[string]bool{}
	for _, test := range tests.Tests {
		for _, case_ := range test.AlertRuleTest {
			if len(case_.ExpAlerts) > 0 {
				fired[case_.AlertName] = true
			}
		}
	}
	alerts, err := AlertQueries()
	if err != nil {
		t.Fatal(err)
	}
	for _, alert := range alerts {
		name := strings.TrimPrefix(alert.Source, "sluice-alerts.yml: ")
		if !fired[name] {
			t.Errorf("alert %s has no unit test in which it fires", name)
		}
	}
	for _, want := range []string{
		"SluiceBrokerDown", "SluiceControllerUnavailable", "SluiceOfflinePartitions", "SluiceUnderReplicatedPartitions",
		"SluiceConsumerLagGrowing", "SluiceConsumerLagSecondsGrowing", "SluiceDiskFillingUp", "SluiceFsyncLatencyHigh",
		"SluiceProduceErrorRate",
	} {
		if !slices.ContainsFunc(alerts, func(q Query) bool { return strings.HasSuffix(q.Source, ": "+want) }) {
			t.Errorf("alert %s is missing", want)
		}
	}
}

// TestDashboardQueriesParse has promtool parse every panel's expression (Grafana's variables
// expanded), each as a recording rule of a generated rules file. That the metrics they name exist is
// checked against a live broker in cmd/sluiced (TestMonitoringAgainstLiveBroker).
func TestDashboardQueriesParse(t *testing.T) {
	tool := promtool(t)
	queries, err := DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 30 {
		t.Fatalf("only %d panel queries found", len(queries))
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range queries {
		if strings.TrimSpace(q.Expr) == "" {
			t.Errorf("%s: empty expression", q.Source)
		}
		if len(MetricNames(q.Expr)) == 0 {
			t.Errorf("%s: names no metric: %s", q.Source, q.Expr)
		}
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: ExpandVariables(q.Expr)})
	}
	file := map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}}
	raw, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "check", "rules", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		// Name the panels of the failing rules: promtool reports them by index.
		var detail strings.Builder
		for i, q := range queries {
			if strings.Contains(string(out), fmt.Sprintf("query_%d\"", i)) || strings.Contains(string(out), fmt.Sprintf("%d:", i)) {
				fmt.Fprintf(&detail, "  %s: %s\n", q.Source, q.Expr)
			}
		}
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s\n%s", err, out, detail.String())
	}
}

// TestMetricNames: the extractor finds the metrics of an expression and nothing in its strings or
// functions.
func TestMetricNames(t *testing.T) {
	check := func(expr string, want ...string) {
		t.Helper()
		if got := MetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("MetricNames(%q) = %q, want %q", expr, got, want)
		}
	}
	check(`sum by (topic) (rate(sluice_topic_bytes_in_total{job=~"$job",topic="sluice_not_a_metric"}[5m]))`, "sluice_topic_bytes_in_total")
	check(`up{job="sluice"} == 0`, "up")
	check(`histogram_quantile(0.99, sum by (le) (rate(sluice_log_fsync_duration_seconds_bucket[5m]))) > 0.25`, "sluice_log_fsync_duration_seconds_bucket")
	check(`process_open_fds / process_max_fds`, "process_max_fds", "process_open_fds")
	check(`sum(sluice_a) / sum(sluice_b) and sluice_a`, "sluice_a", "sluice_b")
	if got := ExpandVariables(`rate(x{a=~"$job",b=~"${topic}"}[$__rate_interval])`); got != `rate(x{a=~".+",b=~".+"}[1m])` {
		t.Errorf("ExpandVariables: %s", got)
	}
}
