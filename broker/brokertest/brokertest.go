// Package brokertest runs in-process brokers for the tests of packages that talk to one (client,
// bench, interop): each on ephemeral ports with its own temporary data dir, logging warnings to
// stderr, closed when the test ends. Tests inside package broker use their own harness, since
// importing this package there would be a cycle.
package brokertest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/broker"
)

// Start starts a broker; mutate (may be nil) adjusts the configuration first.
func Start(t testing.TB, mutate func(*broker.Config)) *broker.Broker {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.RaftListen = "127.0.0.1:0"
	cfg.Metrics = metrics.NewSet()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return b
}
