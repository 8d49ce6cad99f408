package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRenderValue(t *testing.T) {
	check := func(raw []byte, kind, text string) {
		t.Helper()
		got := renderValue(raw)
		if got.Kind != kind || got.Text != text {
			t.Errorf("renderValue(%q) = %s %q, want %s %q", raw, got.Kind, got.Text, kind, text)
		}
	}
	check(nil, "null", "null")
	check([]byte{}, "empty", "(empty)")
	check([]byte(`{"id":1,"tags":["a","b"]}`), "json", "{\n  \"id\": 1,\n  \"tags\": [\n    \"a\",\n    \"b\"\n  ]\n}")
	check([]byte(" [1,2] \n"), "json", "[\n  1,\n  2\n]")
	check([]byte(`{"id":1`), "text", `{"id":1`) // not valid JSON: shown as it is
	check([]byte("42"), "text", "42")           // a JSON scalar reads fine as text
	check([]byte("grüße\tand\nlines"), "text", "grüße\tand\nlines")
	check([]byte("bell\x07"), "hex", "00000000  62 65 6c 6c 07                                    |bell.|\n")
	check([]byte{0xff, 0xfe}, "hex", "00000000  ff fe                                             |..|\n")
}

func TestHexDumpLines(t *testing.T) {
	raw := make([]byte, 20)
	for i := range raw {
		raw[i] = byte(0x41 + i)
	}
	raw[3] = 0
	want := "00000000  41 42 43 00 45 46 47 48  49 4a 4b 4c 4d 4e 4f 50  |ABC.EFGHIJKLMNOP|\n" +
		"00000010  51 52 53 54                                       |QRST|\n"
	if got := hexDump(raw); got != want {
		t.Errorf("hexDump:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderValueTruncates(t *testing.T) {
	big := []byte(strings.Repeat("é", maxRenderedBytes)) // 2 bytes a rune: cut inside one
	got := renderValue(big)
	if got.Kind != "text" || !got.Truncated || got.Size != len(big) || len(got.Text) != maxRenderedBytes {
		t.Errorf("big text: kind %s truncated %v size %d shown %d", got.Kind, got.Truncated, got.Size, len(got.Text))
	}
	bigJSON := []byte(`{"k":"` + strings.Repeat("x", maxRenderedBytes) + `"}`)
	if got := renderValue(bigJSON); got.Kind != "text" || !got.Truncated {
		t.Errorf("big JSON: kind %s truncated %v, want text truncated (not pretty-printed in part)", got.Kind, got.Truncated)
	}
}

func TestRatesAndRing(t *testing.T) {
	ring := newSampleRing(3)
	start := time.Unix(1000, 0)
	for i, end := range []int64{0, 10, 30, 5, 25} { // 5: the topic was made again
		ring.add(sample{At: start.Add(time.Duration(i) * time.Second), TopicEnds: map[string]int64{"t": end}})
	}
	samples := ring.snapshot()
	if len(samples) != 3 || !samples[0].At.Equal(start.Add(2*time.Second)) {
		t.Fatalf("ring kept %d samples starting %v, want the last 3", len(samples), samples[0].At)
	}
	got := topicRate(samples, "t")
	if len(got) != 1 || got[0].Value != 20 {
		t.Errorf("rates %v, want one point of 20/s (the drop from 30 to 5 gives none)", got)
	}
}

func TestNumbers(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 7: "7", 2.5: "2.5", 1234: "1.23k", 1e6: "1M", 123456789: "123M"} {
		if got := shortNumber(v); got != want {
			t.Errorf("shortNumber(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]float64{0: 1, 3: 5, 11: 20, 99: 100, 501: 1000} {
		if got := niceCeiling(v); got != want {
			t.Errorf("niceCeiling(%v) = %v, want %v", v, got, want)
		}
	}
	if got := bytesText(1536); got != "1.5 KiB" {
		t.Errorf("bytesText(1536) = %q", got)
	}
}

func TestParseBrowseQuery(t *testing.T) {
	check := func(raw string, want browseQuery) {
		t.Helper()
		values, _ := url.ParseQuery(raw)
		got, err := parseBrowseQuery(values)
		if err != nil || got != want {
			t.Errorf("parseBrowseQuery(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	check("", browseQuery{Offset: -1, Limit: defaultBrowseLimit})
	check("partition=2&offset=7&limit=9999", browseQuery{Partition: 2, Offset: 7, Limit: maxBrowseLimit})
	check("time=2026-12-02T04:14", browseQuery{Offset: -1, Limit: defaultBrowseLimit, Time: at("2026-12-02T04:14:00Z")})
	check("time=2026-12-02T04:14:38", browseQuery{Offset: -1, Limit: defaultBrowseLimit, Time: at("2026-12-02T04:14:38Z")})
	check("time=2026-12-02T05:14:38%2B01:00", browseQuery{Offset: -1, Limit: defaultBrowseLimit, Time: at("2026-12-02T05:14:38+01:00")})
	for _, bad := range []string{"partition=-1", "offset=x", "limit=0", "time=yesterday"} {
		values, _ := url.ParseQuery(bad)
		if _, err := parseBrowseQuery(values); err == nil {
			t.Errorf("parseBrowseQuery(%q) took it", bad)
		}
	}
}

func TestLineChartEscapes(t *testing.T) {
	now := time.Unix(1000, 0)
	chart := string(lineChart([]chartSeries{{"<script>", []point{{now.Add(-time.Second), 3}, {now, 5}}}}, now, time.Minute, "/s", 300, 100))
	if strings.Contains(chart, "<script>") || !strings.Contains(chart, "&lt;script&gt;") || !strings.Contains(chart, "<b>5/s</b>") {
		t.Errorf("chart:\n%s", chart)
	}
	if empty := string(lineChart(nil, now, time.Minute, "", 300, 100)); !strings.Contains(empty, "collecting samples") {
		t.Errorf("empty chart:\n%s", empty)
	}
}

func TestLazyBeforeSet(t *testing.T) {
	var lazy Lazy
	recorder := httptest.NewRecorder()
	lazy.ServeHTTP(recorder, httptest.NewRequest("GET", "/ui/", nil))
	if recorder.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d before Set, want 503", recorder.Code)
	}
}

func TestClusterFromMetadata(t *testing.T) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ControllerID = 2
	for _, id := range []int32{1, 2} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "127.0.0.1", 9090+id
		resp.Brokers = append(resp.Brokers, b)
	}
	topic := kmsg.NewMetadataResponseTopic()
	topic.Topic = kmsg.StringPtr("t")
	partition := func(index, leader int32, replicas, isr []int32) {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.Replicas, p.ISR = index, leader, replicas, isr
		topic.Partitions = append(topic.Partitions, p)
	}
	partition(1, 1, []int32{1, 2, 3}, []int32{1, 2}) // node 3 fenced: under-replicated
	partition(0, 2, []int32{2, 1}, []int32{2, 1})    // online
	partition(2, -1, []int32{3}, []int32{3})         // only on the fenced node: offline
	resp.Topics = append(resp.Topics, topic)
	state := clusterFromMetadata(resp)
	if state.Online != 1 || state.UnderReplicated != 1 || state.Offline != 1 {
		t.Errorf("states: %d online, %d under-replicated, %d offline; want 1 each", state.Online, state.UnderReplicated, state.Offline)
	}
	if len(state.Brokers) != 3 || !state.Brokers[2].Fenced || state.Brokers[2].NodeID != 3 || !state.Brokers[1].Controller {
		t.Errorf("brokers %+v: want 1 and 2 (controller) alive, 3 fenced", state.Brokers)
	}
	if state.Brokers[0].Leaders != 1 || state.Brokers[1].Leaders != 1 || state.Brokers[2].Replicas != 2 {
		t.Errorf("leaders and replicas per broker: %+v", state.Brokers)
	}
	if got := state.Topics[0].Partitions; got[0].Partition != 0 || got[2].State() != "offline" {
		t.Errorf("partitions not sorted or states wrong: %+v", got)
	}
}
