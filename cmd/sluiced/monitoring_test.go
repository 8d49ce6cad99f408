package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/monitoring"
)

// requireTool finds a binary of the Debian package prometheus, or skips the test (fails it when
// SLUICE_REQUIRE_PROMETHEUS is set, as .ci/run does after installing the package).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_PROMETHEUS") != "" {
			t.Fatalf("%s is not installed (apt-get install prometheus), and SLUICE_REQUIRE_PROMETHEUS is set", name)
		}
		t.Skipf("%s is not installed: apt-get install prometheus (.ci/run installs it)", name)
	}
	return path
}

func scrapeText(t *testing.T, address string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+address+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// sampleValue returns the value of the sample written exactly as series (name and labels).
func sampleValue(text, series string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestMonitoringAgainstLiveBroker runs one sluiced with --metrics-max-topics 2, gives it traffic
// (three topics produced to, a consumer group that commits and then falls behind on records an
// hour old, a fetch of a partition that does not exist), and checks its /metrics: promtool accepts
// it, every family has real help text, the per-topic, error and lag series say what happened, every
// metric the dashboard and the alert rules use is exported, and a real Prometheus server scrapes it,
// answers queries on it and evaluates the alert rules on it without error.
func TestMonitoringAgainstLiveBroker(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--metrics-max-topics", "2")
	client := newClient(t, d.kafka, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, topic := range []string{"orders", "payments", "audit"} {
		createTopic(t, client, topic, 2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := func(topic string, count int, timestamp time.Time) {
		t.Helper()
		var records []*kgo.Record
		for i := range count {
			records = append(records, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(fmt.Sprintf("%s-%d", topic, i)), Timestamp: timestamp})
		}
		if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("orders", 100, time.Now())
	produce("payments", 10, time.Now())
	produce("audit", 7, time.Now()) // third topic: past the cap, counted under __other

	consumer := newClient(t, d.kafka, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	for consumed := 0; consumed < 100; {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 100 records", consumed)
		}
		fetches.EachError(func(topic string, partition int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, partition, err) })
		consumed += fetches.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	// The group falls 50 records behind, records produced with an hour-old timestamp: its lag in
	// seconds comes from the batch at its committed offset.
	hourAgo := time.Now().Add(-time.Hour)
	produce("orders", 50, hourAgo)

	// A fetch of a partition orders does not have: answered UNKNOWN_TOPIC_OR_PARTITION.
	ids, ok := topicIDs(client, "orders")
	if !ok {
		t.Fatal("no topic id for orders")
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = -1, 0, 1<<20
	fetchTopic := kmsg.NewFetchRequestTopic()
	fetchTopic.Topic, fetchTopic.TopicID = "orders", ids["orders"] // franz-go picks the version: name and id
	fetchPartition := kmsg.NewFetchRequestTopicPartition()
	fetchPartition.Partition, fetchPartition.PartitionMaxBytes, fetchPartition.CurrentLeaderEpoch = 9, 1<<20, -1
	fetchTopic.Partitions = append(fetchTopic.Partitions, fetchPartition)
	fetch.Topics = append(fetch.Topics, fetchTopic)
	resp, err := fetch.RequestWith(ctx, client.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 3 {
		t.Fatalf("fetch of orders-9: error code %d, want 3 (UNKNOWN_TOPIC_OR_PARTITION)", code)
	}

	text := scrapeText(t, d.http)

	t.Run("promtool check metrics", func(t *testing.T) {
		tool := requireTool(t, "promtool")
		cmd := exec.Command(tool, "check", "metrics")
		cmd.Stdin = strings.NewReader(text)
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Fatalf("promtool check metrics: %v\n%s", err, out)
		}
	})

	t.Run("help text", func(t *testing.T) {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "# HELP ") && strings.HasSuffix(line, undocumentedHelp) {
				t.Errorf("no help text in metrics_help.go: %s", line)
			}
		}
	})

	t.Run("series", func(t *testing.T) {
		expect := func(series string, check func(float64) bool, want string) {
			t.Helper()
			value, ok := sampleValue(text, series)
			if !ok {
				t.Errorf("no sample %s", series)
			} else if !check(value) {
				t.Errorf("%s = %v, want %s", series, value, want)
			}
		}
		equals := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
		expect(`sluice_topic_records_in_total{topic="orders"}`, equals(150), "150")
		expect(`sluice_topic_records_in_total{topic="payments"}`, equals(10), "10")
		expect(`sluice_topic_records_in_total{topic="__other"}`, equals(7), "7 (audit, past --metrics-max-topics 2)")
		expect(`sluice_topic_produce_requests_total{topic="orders"}`, func(v float64) bool { return v >= 1 }, "at least 1")
		expect(`sluice_topic_records_out_total{topic="orders"}`, func(v float64) bool { return v >= 100 }, "at least the 100 consumed")
		expect(`sluice_topic_bytes_out_total{topic="orders"}`, func(v float64) bool { return v > 0 }, "> 0")
		expect(`sluice_topic_errors_total{topic="orders",api="Fetch",code="UNKNOWN_TOPIC_OR_PARTITION"}`, equals(1), "1")
		expect(`sluice_group_lag_records{group="billing",topic="orders",partition="0"}`, equals(25), "25")
		expect(`sluice_group_lag_records{group="billing",topic="orders",partition="1"}`, equals(25), "25")
		expect(`sluice_group_total_lag_records{group="billing"}`, equals(50), "50")
		hour := func(v float64) bool { return v >= 3600 && v < 3600+120 }
		expect(`sluice_group_lag_seconds{group="billing",topic="orders",partition="0"}`, hour, "about an hour")
		expect(`sluice_group_max_lag_seconds{group="billing"}`, hour, "about an hour")
		expect(`sluice_raft_is_leader`, equals(1), "1")
		expect(`sluice_controller_id`, equals(1), "1")
		expect(`sluice_raft_applied_index`, func(v float64) bool { return v > 0 }, "> 0")
		if strings.Contains(text, `topic="audit"`) {
			t.Errorf("audit has series of its own past --metrics-max-topics 2")
		}
		expect(`sluice_data_dir_log_bytes{dir=`+strconv.Quote(filepath.Join(d.dataDir, "topics"))+`}`, func(v float64) bool { return v > 0 }, "> 0")
		for _, family := range []string{"sluice_data_dir_free_bytes", "sluice_data_dir_segments", "sluice_listener_connections", "process_open_fds", "sluice_log_fsync_duration_seconds_bucket"} {
			if !regexp.MustCompile(`(?m)^` + family + `[{ ]`).MatchString(text) {
				t.Errorf("no %s samples", family)
			}
		}
	})

	t.Run("dashboard and alerts use exported metrics", func(t *testing.T) {
		exported := exportedNames(text)
		dashboard, err := monitoring.DashboardQueries()
		if err != nil {
			t.Fatal(err)
		}
		alerts, err := monitoring.AlertQueries()
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, q := range append(dashboard, alerts...) {
			for _, name := range monitoring.MetricNames(q.Expr) {
				checked++
				if name == "up" {
					continue // Prometheus's own, per scrape target
				}
				if !exported[name] {
					t.Errorf("%s uses %s, which the broker does not export", q.Source, name)
				}
			}
		}
		if checked < 40 {
			t.Fatalf("only %d metric uses found", checked)
		}
	})

	t.Run("prometheus server", func(t *testing.T) {
		prometheusURL := startPrometheus(t, d.http)
		// The first scrape: up is 1 once Prometheus has scraped the broker.
		eventually(t, 30*time.Second, "Prometheus's first scrape of sluiced", func() bool {
			result := promQuery(t, prometheusURL, `up{job="sluice"}`)
			return len(result) == 1 && result[0].value == 1
		})
		check := func(query string, want float64) {
			t.Helper()
			result := promQuery(t, prometheusURL, query)
			if len(result) != 1 || result[0].value != want {
				t.Errorf("%s = %+v, want one sample of %v", query, result, want)
			}
		}
		check(`sluice_topic_records_in_total{job="sluice",topic="orders"}`, 150)
		check(`sum by (group) (sluice_group_lag_records{job="sluice"})`, 50)
		check(`sum(sluice_controller_is_active{job="sluice"})`, 1)
		check(`count(sluice_log_fsync_duration_seconds_bucket{job="sluice"}) > 1`, float64(len(strings.Split(strings.TrimSpace(matchingLines(text, "sluice_log_fsync_duration_seconds_bucket{")), "\n"))))
		// The alert rules, loaded from monitoring/, evaluate on the broker's series without error.
		eventually(t, 30*time.Second, "every alert rule evaluated without error", func() bool {
			return rulesHealthy(t, prometheusURL)
		})
	})
}

func matchingLines(text, prefix string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// exportedNames lists every name a query may select on the exposition: each family with a
// TYPE line, and for histograms and summaries their _bucket, _sum and _count series.
func exportedNames(text string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) != 4 || fields[0] != "#" || fields[1] != "TYPE" {
			continue
		}
		names[fields[2]] = true
		if fields[3] == "histogram" || fields[3] == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[fields[2]+suffix] = true
			}
		}
	}
	return names
}

// startPrometheus runs a Prometheus server that scrapes target every second under job="sluice" and
// evaluates the alert rules of monitoring/ every second. It stops with the test.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	binary := requireTool(t, "prometheus")
	dir := t.TempDir()
	rules, err := monitoring.Files.ReadFile("prometheus/sluice-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sluice-alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [sluice-alerts.yml]
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// Prometheus logs the address it was given, not the one it bound: pick a free port first.
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := listener.Addr().String()
	listener.Close()
	var logs lockedBuffer
	cmd := exec.Command(binary, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", address, "--log.level", "warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.tail(40))
		}
	})
	base := "http://" + address
	eventually(t, 30*time.Second, "Prometheus ready", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, logs.tail(40))
		default:
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

type promSample struct {
	labels map[string]string
	value  float64
}

// promQuery runs an instant query through Prometheus's HTTP API.
func promQuery(t *testing.T, base, query string) []promSample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s", query, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		text, _ := r.Value[1].(string)
		value, err := strconv.ParseFloat(text, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", query, r.Value)
		}
		out = append(out, promSample{labels: r.Metric, value: value})
	}
	return out
}

// rulesHealthy reports whether every loaded rule has been evaluated, none with an error (an error
// fails the test at once).
func rulesHealthy(t *testing.T, base string) bool {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			rules++
			if r.LastError != "" || r.Health == "err" {
				t.Fatalf("rule %s: %s %s", r.Name, r.Health, r.LastError)
			}
			if r.Health != "ok" {
				return false
			}
		}
	}
	return rules >= 9
}
