package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestTopicTrim(t *testing.T) {
	if r := sluice(t, "127.0.0.1:1", nil, "topic", "trim", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage: sluice topic trim") {
		t.Fatalf("topic trim --help: exit %d, %q", r.code, r.stdout)
	}
	brokers := startSluiced(t)
	ok(t, brokers, nil, "topic", "create", "logs", "--partitions", "1")
	ok(t, brokers, nil, "topic", "create", "table", "--partitions", "1", "--config", "cleanup.policy=compact")
	var input strings.Builder
	for i := range 100 {
		fmt.Fprintf(&input, "line %d\n", i)
	}
	ok(t, brokers, strings.NewReader(input.String()), "produce", "logs", "--acks", "all")

	if r := ok(t, brokers, nil, "topic", "trim", "logs", "--partition", "0", "--before", "40"); !strings.Contains(r.stdout, "log start offset 40") {
		t.Fatalf("trim: %q", r.stdout)
	}
	var described []describedTopic
	if err := json.Unmarshal([]byte(ok(t, brokers, nil, "topic", "describe", "logs", "--json").stdout), &described); err != nil {
		t.Fatal(err)
	}
	if p := described[0].Partitions[0]; p.StartOffset != 40 || p.EndOffset != 100 {
		t.Fatalf("after trimming: %+v", p)
	}
	r := ok(t, brokers, nil, "consume", "logs", "--from-beginning", "--exit-at-end")
	if lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); len(lines) != 60 || lines[0] != "line 40" {
		t.Fatalf("consumed %d lines from %q", len(lines), lines[0])
	}
	failsInOneLine(t, "trim a compacted topic", sluice(t, brokers, nil, "topic", "trim", "table", "--partition", "0", "--before", "0"), 1, "POLICY_VIOLATION")
	failsInOneLine(t, "trim beyond the end", sluice(t, brokers, nil, "topic", "trim", "logs", "--partition", "0", "--before", "500"), 1, "OFFSET_OUT_OF_RANGE")
	failsInOneLine(t, "trim an unknown topic", sluice(t, brokers, nil, "topic", "trim", "nope", "--partition", "0", "--before", "1"), 3, "nope")
	failsInOneLine(t, "trim without --partition", sluice(t, brokers, nil, "topic", "trim", "logs", "--before", "1"), 2, "--partition")
}
