package main

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel"

	"github.com/sluice-mq/sluice/loglimit"
	"github.com/sluice-mq/sluice/tracing"
)

// checkTracingFlags validates --otlp-endpoint and --trace-sampling.
func checkTracingFlags(opts options) error {
	if opts.traceSampling < 0 || opts.traceSampling > 1 {
		return fmt.Errorf("--trace-sampling %v: want a ratio from 0 to 1", opts.traceSampling)
	}
	if opts.otlpEndpoint == "" {
		return nil
	}
	if _, err := tracing.ParseEndpoint(opts.otlpEndpoint); err != nil {
		return fmt.Errorf("--otlp-endpoint: %w", err)
	}
	return nil
}

// startTracing starts the OTLP pipeline when --otlp-endpoint is set and gives the broker its
// tracer; the returned function flushes and stops it (a no-op when tracing is off).
func startTracing(ctx context.Context, opts *options, logger *slog.Logger) (func(context.Context), error) {
	if opts.otlpEndpoint == "" {
		return func(context.Context) {}, nil
	}
	pipeline, err := tracing.Start(ctx, tracing.Config{Endpoint: opts.otlpEndpoint, NodeID: opts.broker.NodeID})
	if err != nil {
		return nil, err
	}
	// Export failures (collector down) go to the log, a few per interval.
	exportLog := loglimit.New(logger.With("component", "tracing"), loglimit.DefaultInterval, loglimit.DefaultBurst)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { exportLog.Warn("trace export", "err", err) }))
	opts.broker.RequestTiming.Tracer = pipeline.Tracer()
	opts.broker.RequestTiming.TraceSampling = opts.traceSampling
	logger.Info("tracing requests", "otlp_endpoint", opts.otlpEndpoint, "sampling", opts.traceSampling)
	return func(ctx context.Context) {
		if err := pipeline.Shutdown(ctx); err != nil {
			logger.Warn("tracing shutdown", "err", err)
		}
	}, nil
}
