# sluice build and test entry points. `make run` starts a single-node broker with data in ./data;
# `make test` runs every test (the same command CI runs).
GO ?= go
BIN := bin

.PHONY: all build run test test-short bench soak vet fmt clean

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
	$(GO) test -run '^$$' -bench . -benchmem ./segment/ ./index/ ./batch/

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
