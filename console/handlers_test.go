package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/broker/brokertest"
	"github.com/sluice-mq/sluice/client"
)

// testConsole starts an in-process broker and a console on it behind an httptest server.
func testConsole(t *testing.T, writes bool) (server *httptest.Server, kafka *kgo.Client) {
	t.Helper()
	_, server, kafka = newTestConsole(t, writes)
	return server, kafka
}

func newTestConsole(t *testing.T, writes bool) (c *Console, server *httptest.Server, kafka *kgo.Client) {
	t.Helper()
	b := brokertest.Start(t, nil)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Writes, cfg.SampleInterval = []string{b.Addr().String()}, writes, 200*time.Millisecond
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	server = httptest.NewServer(c)
	t.Cleanup(func() { server.Close(); c.Close() })
	kafka, err = kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	return c, server, kafka
}

func createTopic(t *testing.T, kafka *kgo.Client, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(context.Background(), kafka)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic %s: %v %+v", name, err, resp)
	}
}

func commitOffset(t *testing.T, kafka *kgo.Client, group, topic string, partition int32, offset int64) {
	t.Helper()
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = group, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = partition, offset, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if resp, err := commit.RequestWith(context.Background(), kafka); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, resp)
	}
}

// get fetches path and returns the status and body.
func get(t *testing.T, httpClient *http.Client, server *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(server.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestPages(t *testing.T) {
	server, kafka := testConsole(t, false)
	createTopic(t, kafka, "orders", 2)
	ctx := context.Background()
	records := []*kgo.Record{
		{Topic: "orders", Partition: 0, Key: []byte("order-7"), Value: []byte(`{"id":7,"item":"tea"}`), Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("test")}}},
		{Topic: "orders", Partition: 0, Value: []byte{0x00, 0x01, 0xfe, 0xff, 'h', 'i'}},
		{Topic: "orders", Partition: 1, Value: []byte("plain <b>text</b>")},
	}
	if err := kafka.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commitOffset(t, kafka, "billing", "orders", 0, 1)
	commitOffset(t, kafka, "team/a b?c#d", "orders", 1, 1) // a group name that needs escaping in links

	httpClient := server.Client()
	page := func(path string, wantStatus int, wants ...string) string {
		t.Helper()
		status, body := get(t, httpClient, server, path)
		if status != wantStatus {
			t.Fatalf("GET %s: status %d, want %d\n%s", path, status, wantStatus, body)
		}
		for _, want := range wants {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: no %q in\n%s", path, want, body)
			}
		}
		return body
	}
	page("/ui/", 200, "Controller", "node 1", "3 online", "0 under-replicated", `id="throughput"`, "read-only", "Every partition has a leader")
	page("/ui/topics", 200, `href="/ui/topics/orders"`, "<td class=\"num\">3</td>", "168h") // 3 records; 7 days retention
	page("/ui/topics/orders", 200, "retention.ms", "online", `href="/ui/topics/orders/messages?partition=1"`)
	body := page("/ui/topics/orders/messages?partition=0&offset=0", 200,
		"order-7", "&#34;item&#34;: &#34;tea&#34;", // pretty-printed JSON, escaped
		"<b>source</b>",
		"00000000  00 01 fe ff 68 69", "|....hi|") // binary as hex
	if strings.Contains(body, "data-live") && strings.Contains(body, `<table id="messages" class="messages" data-live>`) {
		t.Error("a page at a given offset must not follow the newest records")
	}
	page("/ui/topics/orders/messages?partition=1", 200, "plain &lt;b&gt;text&lt;/b&gt;", `<table id="messages" class="messages" data-live>`)
	page("/ui/topics/orders/messages?partition=1&time=2000-01-01T00:00", 200, "plain &lt;b&gt;text&lt;/b&gt;")
	page("/ui/topics/orders/messages?partition=0&offset=1&limit=1", 200, "1 record(s) from offset 1", "00 01 fe ff")
	page("/ui/groups", 200, `href="/ui/groups/billing"`)
	// Partition 0: committed 1 of 2, lag 1; partition 1: nothing committed, lag 1 (what it holds).
	page("/ui/groups/billing", 200, `data-lag="2"`, "No members", `id="lag-chart"`)
	page("/ui/groups", 200, `href="/ui/groups/team%2Fa%20b%3Fc%23d"`)
	// Partition 1 committed to its end; partition 0 has no commit and lags by its 2 records.
	page("/ui/groups/team%2Fa%20b%3Fc%23d", 200, `data-lag="2"`, `<h1>Group team/a b?c#d</h1>`)
	page("/ui/throughput", 200, `id="throughput"`, "all topics")
	page("/ui/config", 200, "log.retention.ms", "default.replication.factor")
	page("/ui/static/console.js", 200, "data-live")
	page("/ui/static/console.css", 200, "--accent")

	page("/ui/topics/nope", 404, "unknown topic")
	page("/ui/topics/nope/messages", 404, "unknown topic")
	page("/ui/topics/orders/messages?partition=9", 404, "no partition 9")
	page("/ui/topics/orders/messages?offset=x", 400, "want an offset")
	page("/ui/groups/nobody", 404, "no such group")
	// Browsing an unknown topic did not create it.
	page("/ui/topics", 200)
	if _, body := get(t, httpClient, server, "/ui/topics"); strings.Contains(body, "/ui/topics/nope") {
		t.Error("browsing an unknown topic created it")
	}
}

func TestWritesOffByDefault(t *testing.T) {
	server, _ := testConsole(t, false)
	_, body := get(t, server.Client(), server, "/ui/topics")
	if strings.Contains(body, `<form method="post"`) {
		t.Error("read-only console shows a write form")
	}
	resp, err := server.Client().PostForm(server.URL+"/ui/topics", url.Values{"name": {"made"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST with writes off: status %d, want 403", resp.StatusCode)
	}
	if _, body := get(t, server.Client(), server, "/ui/topics/made"); !strings.Contains(body, "unknown topic") {
		t.Error("a POST with writes off created the topic")
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestWritesWithCSRF(t *testing.T) {
	server, kafka := testConsole(t, true)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, body := get(t, browser, server, "/ui/topics")
	match := csrfField.FindStringSubmatch(body)
	if match == nil {
		t.Fatalf("no CSRF field in the topics page:\n%s", body)
	}
	token := match[1]
	post := func(client *http.Client, path string, form url.Values, wantStatus int) string {
		t.Helper()
		resp, err := client.PostForm(server.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantStatus {
			t.Fatalf("POST %s: status %d, want %d\n%s", path, resp.StatusCode, wantStatus, body)
		}
		return resp.Header.Get("Location") + string(body)
	}
	post(browser, "/ui/topics", url.Values{"name": {"made"}}, 403)                        // no token
	post(browser, "/ui/topics", url.Values{"name": {"made"}, "csrf": {token + "0"}}, 403) // wrong token
	stranger := &http.Client{CheckRedirect: browser.CheckRedirect}                        // the token without the cookie
	post(stranger, "/ui/topics", url.Values{"name": {"made"}, "csrf": {token}}, 403)
	post(browser, "/ui/topics", url.Values{"name": {"made"}, "partitions": {"lots"}, "csrf": {token}}, 400)
	if where := post(browser, "/ui/topics", url.Values{"name": {"made"}, "partitions": {"3"}, "csrf": {token}}, 303); !strings.HasPrefix(where, "/ui/topics/made") {
		t.Errorf("create redirected to %q", where)
	}
	if _, body := get(t, browser, server, "/ui/topics/made"); !strings.Contains(body, "<dt>Partitions</dt><dd>3</dd>") {
		t.Errorf("created topic's page:\n%s", body)
	}

	// Reset an empty group's offsets to the end, then delete the group.
	if err := kafka.ProduceSync(context.Background(), &kgo.Record{Topic: "made", Partition: 2, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	post(browser, "/ui/groups/fresh/reset-offsets", url.Values{"topic": {"made"}, "to": {"sideways"}, "csrf": {token}}, 400)
	post(browser, "/ui/groups/fresh/reset-offsets", url.Values{"topic": {"made"}, "to": {"latest"}, "csrf": {token}}, 303)
	if _, body := get(t, browser, server, "/ui/groups/fresh"); !strings.Contains(body, `data-lag="0"`) || !strings.Contains(body, `<td class="num">1</td><td class="num">1</td>`) {
		t.Errorf("group after reset to latest:\n%s", body)
	}
	post(browser, "/ui/groups/fresh/delete", url.Values{"confirm": {"other"}, "csrf": {token}}, 400)
	post(browser, "/ui/groups/fresh/delete", url.Values{"confirm": {"fresh"}, "csrf": {token}}, 303)
	if status, _ := get(t, browser, server, "/ui/groups/fresh"); status != 404 {
		t.Errorf("deleted group: status %d, want 404", status)
	}

	post(browser, "/ui/topics/made/delete", url.Values{"confirm": {"mad"}, "csrf": {token}}, 400)
	post(browser, "/ui/topics/made/delete", url.Values{"confirm": {"made"}, "csrf": {token}}, 303)
	if status, _ := get(t, browser, server, "/ui/topics/made"); status != 404 {
		t.Errorf("deleted topic: status %d, want 404", status)
	}
}

func TestAuthorizeHook(t *testing.T) {
	b := brokertest.Start(t, nil)
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Writes = []string{b.Addr().String()}, true
	var asked []Action
	cfg.Authorize = func(r *http.Request, action Action) error {
		asked = append(asked, action)
		return errDenied
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server := httptest.NewServer(c)
	defer server.Close()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	_, body := get(t, browser, server, "/ui/topics")
	token := csrfField.FindStringSubmatch(body)[1]
	resp, err := browser.PostForm(server.URL+"/ui/topics", url.Values{"name": {"guarded"}, "csrf": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || len(asked) != 1 || asked[0] != (Action{"create-topic", "guarded"}) {
		t.Errorf("status %d, asked %v: want 403 after asking for create-topic guarded", resp.StatusCode, asked)
	}
}

var errDenied = errorString("denied by policy")

type errorString string

func (e errorString) Error() string { return string(e) }

func TestShareGroupPage(t *testing.T) {
	server, kafka := testConsole(t, false)
	createTopic(t, kafka, "jobs", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 5 {
		if err := kafka.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Value: []byte(fmt.Sprintf("job %d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(client.WithSeedBrokers(kafka.OptValue(kgo.SeedBrokers).([]string)...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := client.NewAdmin(c).AlterGroupConfigs(ctx, "workers", client.SetConfig("share.auto.offset.reset", "earliest")); err != nil {
		t.Fatal(err)
	}
	worker, err := client.NewShareConsumer(c, "workers", []string{"jobs"})
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close(ctx)
	// Accept two records, hold the rest: the page shows the member and a lag of 3.
	accepted := 0
	for accepted < 2 {
		records, err := worker.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range records {
			if accepted < 2 && r.Offset < 2 {
				r.Accept()
				accepted++
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, body := get(t, server.Client(), server, "/ui/groups/workers")
		if status == 200 && strings.Contains(body, "Start offset") && strings.Contains(body, "jobs: 0") && strings.Contains(body, `data-lag="3"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share group page never showed the member and lag 3 (status %d):\n%s", status, body)
		}
		pollCtx, cancelPoll := context.WithTimeout(ctx, 200*time.Millisecond)
		worker.Poll(pollCtx) // carries the acknowledgements; the rest stay locked to this member
		cancelPoll()
	}
	if _, body := get(t, server.Client(), server, "/ui/groups"); !strings.Contains(body, "share") {
		t.Errorf("groups page does not list the share group:\n%s", body)
	}
}

func TestConsumerProtocolGroupPage(t *testing.T) {
	server, kafka := testConsole(t, false)
	createTopic(t, kafka, "events", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: 1, Value: []byte("e")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(kafka.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumerGroup("kip848"),
		kgo.ConsumeTopics("events"), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	if fetches := member.PollRecords(ctx, 1); fetches.Err() != nil || fetches.NumRecords() != 1 {
		t.Fatalf("poll: %v, %d records", fetches.Err(), fetches.NumRecords())
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	status, body := get(t, server.Client(), server, "/ui/groups/kip848")
	for _, want := range []string{"events: 0,1", `data-lag="0"`, "consumer range"} {
		if status != 200 || !strings.Contains(body, want) {
			t.Fatalf("KIP-848 group page (status %d) lacks %q:\n%s", status, want, body)
		}
	}
	if _, body := get(t, server.Client(), server, "/ui/groups"); !strings.Contains(body, "consumer (consumer)") {
		t.Errorf("groups page does not show the group's type:\n%s", body)
	}
}

// The sampler starts with the first request and turns produced records into rates of records
// and bytes, which the throughput page charts.
func TestSamplerRates(t *testing.T) {
	c, server, kafka := newTestConsole(t, false)
	createTopic(t, kafka, "metered", 1)
	if n := len(c.samples.snapshot()); n != 0 {
		t.Fatalf("%d samples before any request: the sampler must wait for the console to be opened", n)
	}
	get(t, server.Client(), server, "/ui/throughput")
	await := func(what string, condition func([]sample) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !condition(c.samples.snapshot()) {
			if time.Now().After(deadline) {
				t.Fatalf("no sample shows %s", what)
			}
			time.Sleep(10 * time.Millisecond) // polling the ring: the sampler has no change signal
		}
	}
	await("the topic", func(s []sample) bool { return len(s) > 0 && s[len(s)-1].TopicEnds["metered"] == 0 })
	records := make([]*kgo.Record, 100)
	for i := range records {
		records[i] = &kgo.Record{Topic: "metered", Value: []byte(strings.Repeat("x", 100))}
	}
	if err := kafka.ProduceSync(context.Background(), records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	positive := func(points []point) bool {
		for _, p := range points {
			if p.Value > 0 {
				return true
			}
		}
		return false
	}
	await("records and bytes coming in", func(s []sample) bool {
		return positive(topicRate(s, "metered")) && positive(topicBytesRate(s, "metered"))
	})
	samples := c.samples.snapshot()
	// Sizes are as stored: franz-go compresses the repeated bytes, so only their presence is sure.
	if last := samples[len(samples)-1]; last.TopicEnds["metered"] != 100 || last.TopicBytes["metered"] <= 0 {
		t.Errorf("last sample: end %d, %d bytes; want 100 records and their bytes", last.TopicEnds["metered"], last.TopicBytes["metered"])
	}
	_, body := get(t, server.Client(), server, "/ui/throughput")
	if !strings.Contains(body, `id="throughput-bytes"`) || !strings.Contains(body, `href="/ui/topics/metered"`) {
		t.Errorf("throughput page:\n%s", body)
	}
}
