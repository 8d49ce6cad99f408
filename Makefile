# sluice build and test entry points. `make run` starts a single-node broker with data in ./data;
# `make test` runs every test (the same command CI runs).
GO ?= go
BIN := bin

.PHONY: all build run test test-short bench bench-run perf perf-compare soak vet fmt clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/sluiced --data-dir ./data

test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...

test-short:
	$(GO) test -count=1 -short ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./segment/ ./index/ ./batch/ ./netpoll/ ./protocol/

# soak: the crash, failover and rebalance tests over and over (SOAK_COUNT rounds), to shake out
# rare interleavings; not part of `make test`.
SOAK_COUNT ?= 20
soak:
	$(GO) test -count=$(SOAK_COUNT) -timeout 2h -run 'Kill|Crash|Chain|Rebalance|Restart' ./cmd/sluiced/ ./client/ ./broker/ ./segment/

# bench-run: `sluice bench` with WORKLOAD (default: 1 topic, 8 partitions, 100-byte messages) for
# DURATION against BROKERS (a running broker, e.g. `make run`); results in bench-results/.
WORKLOAD ?= bench/workloads/1-topic-8-partitions-100b.yaml
DURATION ?= 20s
BROKERS ?= 127.0.0.1:9092
bench-run: build
	$(BIN)/sluice bench run --brokers $(BROKERS) --workload $(WORKLOAD) --duration $(DURATION)

# perf: start a throwaway broker, run WORKLOAD (ACKS=1|all to override), capture pprof CPU and
# allocation profiles and perf stat, store all under perf/results/<date>-<workload>/.
perf: build
	WORKLOAD=$(WORKLOAD) DURATION=$(or $(PERF_DURATION),30s) perf/run.sh

# perf-compare OLD=perf/results/a NEW=perf/results/b: side-by-side bench figures (and benchstat).
perf-compare:
	perf/compare.sh $(OLD) $(NEW)

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
