package bench

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShippedWorkloadsLoad(t *testing.T) {
	paths, _ := filepath.Glob("workloads/*.yaml")
	if len(paths) < 4 {
		t.Fatalf("%d workloads in bench/workloads", len(paths))
	}
	for _, path := range paths {
		w, err := LoadWorkload(path)
		if err != nil {
			t.Fatal(err)
		}
		if w.Name+".yaml" != filepath.Base(path) {
			t.Errorf("%s is named %q", path, w.Name)
		}
	}
}

func TestParseWorkload(t *testing.T) {
	w, err := ParseWorkload([]byte(`{"partitions": 3, "linger": "2ms", "acks": "all"}`))
	if err != nil || w.Partitions != 3 || w.Linger != 2*time.Millisecond || w.Acks != "all" || w.MessageSize != 100 {
		t.Fatalf("JSON workload: %+v, %v", w, err)
	}
	if _, err := ParseWorkload(nil); err != nil {
		t.Fatalf("empty workload: %v", err)
	}
	bad := func(text, want string) {
		t.Helper()
		_, err := ParseWorkload([]byte(text))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", text, err, want)
		}
	}
	bad("partitons: 3", "partitons")
	bad("partitions: [", "yaml")
	bad("message_size: 8", "message_size")
	bad("acks: 2\nkeys: some", "acks")
	bad("producers: 0\nconsumer_groups: 0", "nothing to run")
	bad("consumers_per_group: 9\npartitions: 8", "consumers_per_group")
}

func TestPlanSplitDealsEverythingOnce(t *testing.T) {
	w := DefaultWorkload()
	w.Topics, w.Producers, w.ConsumerGroups, w.ConsumersPerGroup = 2, 3, 2, 3
	full := FullPlan(w, "client", []string{"b"}, []string{"t0", "t1"})
	if len(full.Producers) != 6 || len(full.Consumers) != 12 {
		t.Fatalf("full plan: %d producers, %d consumers", len(full.Producers), len(full.Consumers))
	}
	// Each group of each topic has its members once, under a name of its own; the broker, not the
	// plan, shares the partitions among them.
	members := map[string][]int{}
	for _, c := range full.Consumers {
		id := GroupID(full.Topics[c.Topic], c.Group)
		members[id] = append(members[id], c.Member)
	}
	if len(members) != 2*2 {
		t.Fatalf("%d group ids for 2 topics x 2 groups: %v", len(members), members)
	}
	for id, m := range members {
		if len(m) != 3 || m[0] != 0 || m[1] != 1 || m[2] != 2 {
			t.Fatalf("group %s has members %v", id, m)
		}
	}
	parts := full.Split(4)
	producers, consumers := 0, 0
	for _, p := range parts {
		producers += len(p.Producers)
		consumers += len(p.Consumers)
	}
	if producers != 6 || consumers != 12 {
		t.Fatalf("split: %d producers, %d consumers", producers, consumers)
	}
}

func TestMergeAddsAgents(t *testing.T) {
	w := DefaultWorkload()
	part := func(published, consumed int64, latency int64) *Result {
		r := newRecorder()
		r.startMeasuring()
		for range published {
			r.published(time.Duration(latency)*time.Microsecond, 100, nil)
		}
		r.tick(1, 1)
		return &Result{Workload: w, Published: published, Consumed: consumed, TotalPublished: published, TotalConsumed: consumed,
			MeasuredSeconds: 1, PublishLatency: r.mu.publish, EndToEndLatency: r.mu.endToEnd, Timeline: r.mu.timeline}
	}
	merged := Merge([]*Result{part(100, 90, 1000), part(300, 300, 5000)}, []string{"a", "b"})
	if merged.Published != 400 || merged.BacklogAtEnd != 10 || merged.PublishLatency.Count() != 400 {
		t.Fatalf("merged: %+v", merged)
	}
	if p50 := merged.Summary.PublishLatencyMs.P50; p50 < 4.9 || p50 > 5.1 {
		t.Fatalf("merged p50 %v ms, want about 5", p50)
	}
	if len(merged.Timeline) != 1 || merged.Timeline[0].Published != 400 {
		t.Fatalf("merged timeline: %+v", merged.Timeline)
	}
}
