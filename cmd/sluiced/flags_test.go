package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/segment"
)

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	opts, err := parseFlags([]string{"--data-dir", "/tmp/x", "--flush", "append", "--node-id", "7"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if opts.broker.DataDir != "/tmp/x" || opts.broker.Log.Flush != segment.FlushOnAppend || opts.broker.NodeID != 7 {
		t.Fatalf("parsed %+v", opts.broker)
	}

	opts, err = parseFlags([]string{"--otlp-endpoint", "127.0.0.1:4318", "--trace-sampling", "0.5", "--slow-request", "250ms"}, &out)
	if err != nil || opts.otlpEndpoint != "127.0.0.1:4318" || opts.traceSampling != 0.5 || opts.broker.RequestTiming.SlowRequest != 250*time.Millisecond {
		t.Fatalf("tracing flags: %v, %q %v %v", err, opts.otlpEndpoint, opts.traceSampling, opts.broker.RequestTiming.SlowRequest)
	}

	t.Setenv("SLUICE_LISTEN", "127.0.0.1:19999")
	t.Setenv("SLUICE_DEFAULT_PARTITIONS", "4")
	opts, err = parseFlags([]string{"--default-partitions", "6"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if opts.broker.Listen != "127.0.0.1:19999" || opts.broker.DefaultPartitions != 6 {
		t.Fatalf("environment then flags: listen %q partitions %d", opts.broker.Listen, opts.broker.DefaultPartitions)
	}

	for _, args := range [][]string{{"--nope"}, {"--flush", "sometimes"}, {"--node-id", "-1"}, {"--listen", "nowhere"}, {"extra"}, {"--default-partitions", "0"},
		{"--trace-sampling", "1.5"}, {"--otlp-endpoint", "grpc://collector:4317"}, {"--slow-request", "-1s"}} {
		out.Reset()
		_, err := parseFlags(args, &out)
		if err == nil {
			t.Errorf("%v accepted", args)
			continue
		}
		if strings.Contains(err.Error(), "\n") && !strings.Contains(err.Error(), "invalid config") || out.Len() > 0 {
			t.Errorf("%v: want a one-line error and no usage dump, got %q and %d bytes of output", args, err, out.Len())
		}
	}
	out.Reset()
	if _, err := parseFlags([]string{"--help"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-data-dir") {
		t.Errorf("--help: %v, %q", err, out.String())
	}

	t.Setenv("SLUICE_NODE_ID", "abc")
	if _, err := parseFlags(nil, &out); err == nil || !strings.Contains(err.Error(), "SLUICE_NODE_ID") {
		t.Errorf("bad environment value: %v", err)
	}
}
