package main

// A real sluiced with --otlp-endpoint posts its request spans to an OTLP/HTTP collector (a small
// httptest server here), and --slow-request makes it log slow requests with their stages.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSluicedExportsTracesOverOTLP(t *testing.T) {
	var producePosts, posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
			// Span names travel as plain protobuf strings: the Produce span and its stages.
			if strings.Contains(string(body), "Produce") && strings.Contains(string(body), "replication") {
				producePosts.Add(1)
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // the SDK's batch delay, ms: export soon after the produce

	d := startDaemon(t, t.TempDir(), "--otlp-endpoint", collector.URL, "--trace-sampling", "1", "--slow-request", "1ns")
	defer d.stop()
	client := newClient(t, d.kafka, kgo.DefaultProduceTopic("traced"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	eventually(t, 20*time.Second, "an OTLP POST with the Produce span and its stages", func() bool { return producePosts.Load() > 0 })
	if !strings.Contains(d.logs(), `msg="slow request"`) || !strings.Contains(d.logs(), "stages.queue=") {
		t.Errorf("--slow-request 1ns logged no slow request with stages:\n%s", d.logs())
	}
}
