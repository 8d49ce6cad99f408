package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/sluice-mq/sluice/broker"
)

// memoryLimitHeadroom is what the soft memory limit leaves above the network bounds for
// indexes, metadata, groups and the Go runtime.
const memoryLimitHeadroom = 1 << 30

// setMemoryLimit gives the Go runtime a soft memory limit derived from the network bounds,
// unless GOMEMLIMIT is set. The bounds keep live buffers in check, but with the default GC
// pacing a heap of 600 MB of live connection buffers still grew the process to 3.5 GB (garbage
// of outgrown buffers waiting for a collection); near the limit the collector runs sooner
// instead. It is soft: a larger live heap only costs GC CPU, capped by the runtime.
func setMemoryLimit(logger *slog.Logger, cfg broker.Config) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	limit := cfg.MaxInFlightBytes + cfg.MaxBufferedInputBytes + cfg.MaxBufferedOutputBytes + memoryLimitHeadroom
	debug.SetMemoryLimit(limit)
	logger.Info("soft memory limit set from the network bounds (GOMEMLIMIT overrides)", "bytes", limit)
}
