package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseEndpoint(t *testing.T) {
	good := map[string]Target{
		"127.0.0.1:4318":                {HostPort: "127.0.0.1:4318", Path: "/v1/traces", Insecure: true},
		"http://collector:4318":         {HostPort: "collector:4318", Path: "/v1/traces", Insecure: true},
		"https://collector:443/":        {HostPort: "collector:443", Path: "/v1/traces"},
		"http://collector:4318/custom/": {HostPort: "collector:4318", Path: "/custom/", Insecure: true},
	}
	for endpoint, want := range good {
		if got, err := ParseEndpoint(endpoint); err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %+v, %v; want %+v", endpoint, got, err, want)
		}
	}
	for _, bad := range []string{"", "collector", "grpc://collector:4317", "http://:4318x"} {
		if got, err := ParseEndpoint(bad); err == nil {
			t.Errorf("ParseEndpoint(%q) = %+v, accepted", bad, got)
		}
	}
}

// TestPipelinePostsSpans: a span ended on the pipeline's tracer reaches an HTTP collector as an
// OTLP protobuf POST to /v1/traces (here on Shutdown, which flushes the queue).
func TestPipelinePostsSpans(t *testing.T) {
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && len(body) > 0 &&
			strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-protobuf") && strings.Contains(string(body), "Produce") {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pipeline, err := Start(ctx, Config{Endpoint: collector.URL, NodeID: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, span := pipeline.Tracer().Start(ctx, "Produce")
	span.End()
	if err := pipeline.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Fatal("the collector received no OTLP trace POST holding the span")
	}
}
