package broker

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the broker's goroutines and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// slowLines returns the "slow request" lines logged to out, decoded.
func slowLines(t testing.TB, out *syncBuffer) []map[string]any {
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == "slow request" {
			lines = append(lines, entry)
		}
	}
	return lines
}

func startLoggedBroker(t *testing.T, slow time.Duration) (*Broker, *syncBuffer) {
	out := &syncBuffer{}
	b := startBroker(t, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cfg.RequestTiming.SlowRequest = slow
	})
	return b, out
}

func TestSlowRequestLogsStageTimings(t *testing.T) {
	b, out := startLoggedBroker(t, time.Nanosecond) // every request is slow
	c := dial(t, b)
	c.createTopic("slow", 1, nil)
	c.produceWith(produceRequest(9, -1, "slow", 0, recordBatch(batchTime, "a", "b")))

	var produce map[string]any
	await(t, "a slow-request line for the produce", func() bool {
		for _, line := range slowLines(t, out) {
			if line["api"] == "Produce" {
				produce = line
				return true
			}
		}
		return false
	})
	if produce["client_id"] != "sluice-test" || produce["size_bytes"].(float64) <= 0 || produce["connection"] == nil {
		t.Errorf("slow line lacks the request's identity: %v", produce)
	}
	stages, _ := produce["stages"].(map[string]any)
	for _, stage := range []string{"total", "queue", "append", "fsync", "replication", "send"} {
		if _, ok := stages[stage]; !ok {
			t.Errorf("slow line lacks stage %q: %v", stage, produce)
		}
	}
	if _, ok := stages["wait"]; ok {
		t.Errorf("a produce logged a fetch stage: %v", stages)
	}
}

func TestSlowRequestThresholdAndOff(t *testing.T) {
	for _, slow := range []time.Duration{0, time.Hour} {
		b, out := startLoggedBroker(t, slow)
		c := dial(t, b)
		c.createTopic("fast", 1, nil)
		c.mustProduce("fast", 0, recordBatch(batchTime, "a"))
		c.readAll("fast", 0)
		if lines := slowLines(t, out); len(lines) != 0 {
			t.Errorf("threshold %v: %d slow-request lines: %v", slow, len(lines), lines)
		}
	}
}

func TestRequestTimingConfigValidate(t *testing.T) {
	for _, bad := range []RequestTimingConfig{{SlowRequest: -time.Second}, {TraceSampling: 1.5}, {TraceSampling: -0.1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := DefaultRequestTimingConfig().Validate(); err != nil {
		t.Errorf("default refused: %v", err)
	}
}
