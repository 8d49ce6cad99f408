package broker

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// startBroker runs a broker in-process on an ephemeral port with its own data dir. mutate may adjust
// the config before start. The broker is closed when the test ends.
func startBroker(t testing.TB, mutate func(*Config)) *Broker {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	if mutate != nil {
		mutate(&cfg)
	}
	return startBrokerWith(t, cfg)
}

func testConfig(t testing.TB, dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = "127.0.0.1:0"
	cfg.RaftListen = "127.0.0.1:0"
	cfg.Log.SegmentBytes = 8 << 20
	cfg.Metrics = metrics.NewSet()
	level := slog.LevelWarn
	if os.Getenv("SLUICE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return cfg
}

func startBrokerWith(t testing.TB, cfg Config) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Start(ctx, cfg)
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
