// Package tracing is sluiced's OpenTelemetry trace pipeline: an OTLP/HTTP exporter behind the
// SDK's batch span processor, feeding the tracer the broker's request tracing writes to
// (broker.RequestTimingConfig). The broker samples requests itself (so an unsampled request never
// reaches the SDK), hence the provider records every span it is given.
//
// Invariants:
//   - Exporting never blocks the broker: spans are queued (2048 by default) and a full queue drops
//     them; exports run on the processor's goroutine, owned by the Pipeline and stopped by Shutdown.
//   - No global state is touched: the caller gets a tracer, not a registered global provider.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTracesPath is where OTLP/HTTP collectors take traces.
const DefaultTracesPath = "/v1/traces"

// Config configures a Pipeline.
type Config struct {
	// Endpoint is the collector: host:port (plain HTTP, path /v1/traces) or a URL
	// http(s)://host:port[/path] (an empty path means /v1/traces).
	Endpoint string
	// ServiceName and NodeID name this process in every span's resource.
	ServiceName string
	NodeID      int32
}

// Pipeline exports the spans of its tracer.
type Pipeline struct {
	provider *sdktrace.TracerProvider
}

// Target is where Endpoint points: host:port, URL path and whether TLS is off.
type Target struct {
	HostPort string
	Path     string
	Insecure bool
}

// ParseEndpoint reads an Endpoint value.
func ParseEndpoint(endpoint string) (Target, error) {
	if endpoint == "" {
		return Target{}, fmt.Errorf("tracing: empty OTLP endpoint")
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return Target{}, fmt.Errorf("tracing: OTLP endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Target{}, fmt.Errorf("tracing: OTLP endpoint %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" || u.Port() == "" {
		return Target{}, fmt.Errorf("tracing: OTLP endpoint %q: want host:port", endpoint)
	}
	path := u.Path
	if path == "" || path == "/" {
		path = DefaultTracesPath
	}
	return Target{HostPort: u.Host, Path: path, Insecure: u.Scheme == "http"}, nil
}

// Start builds the pipeline; nothing is sent until spans end.
func Start(ctx context.Context, cfg Config) (*Pipeline, error) {
	target, err := ParseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	options := []otlptracehttp.Option{otlptracehttp.WithEndpoint(target.HostPort), otlptracehttp.WithURLPath(target.Path)}
	if target.Insecure {
		options = append(options, otlptracehttp.WithInsecure())
	}
	exporter, err := otlptracehttp.New(ctx, options...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	serviceName := cfg.ServiceName
	if serviceName == "" {
		serviceName = "sluiced"
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", serviceName),
		attribute.String("service.instance.id", strconv.Itoa(int(cfg.NodeID))),
		attribute.String("messaging.system", "kafka"))
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	return &Pipeline{provider: provider}, nil
}

// Tracer is the tracer to hand the broker.
func (p *Pipeline) Tracer() trace.Tracer {
	return p.provider.Tracer("github.com/sluice-mq/sluice/broker")
}

// Shutdown exports what is queued (within ctx) and stops the exporter.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	if err := p.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
