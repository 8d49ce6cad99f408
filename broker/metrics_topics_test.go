package broker

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestTopicMetricsCap: the first maxTopics known topics get series of their own; further topics,
// unknown names and the reserved name count under __other; a deleted topic's series go at the next
// scrape and free its place.
func TestTopicMetricsCap(t *testing.T) {
	known := map[string]bool{"a": true, "b": true, "c": true}
	m := newTopicMetrics(2, func(name string) bool { return known[name] })
	m.topic("a").recordsIn.Add(1)
	m.topic("nosuch").recordsIn.Add(10)
	m.topic("b").recordsIn.Add(2)
	m.topic("c").recordsIn.Add(100) // past the cap
	m.topic(otherTopic).recordsIn.Add(1000)
	m.topic("a").failed("Produce", 6)
	m.topic("a").failed("Produce", 6)
	scrape := func() string {
		var out bytes.Buffer
		m.write(&out)
		return out.String()
	}
	text := scrape()
	for _, want := range []string{
		`sluice_topic_records_in_total{topic="a"} 1`,
		`sluice_topic_records_in_total{topic="b"} 2`,
		`sluice_topic_records_in_total{topic="__other"} 1110`,
		`sluice_topic_errors_total{topic="a",api="Produce",code="NOT_LEADER_OR_FOLLOWER"} 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `topic="c"`) || strings.Contains(text, `topic="nosuch"`) {
		t.Errorf("series past the cap or for an unknown topic:\n%s", text)
	}
	delete(known, "a")
	scrape()
	m.topic("c").recordsIn.Add(5)
	text = scrape()
	if strings.Contains(text, `topic="a"`) || !strings.Contains(text, `sluice_topic_records_in_total{topic="c"} 5`+"\n") {
		t.Errorf("deleted topic a should have given its place to c:\n%s", text)
	}
}

// TestTopicMetricsAdmit: a scrape gives the free places to the local topics in name order, after
// those that took one by their traffic.
func TestTopicMetricsAdmit(t *testing.T) {
	known := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	m := newTopicMetrics(3, func(name string) bool { return known[name] })
	m.topic("d")
	m.admit([]string{"a", "b", "c", "d"})
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "d": true} {
		if m.has(name) != want {
			t.Errorf("has(%s) = %v, want %v", name, !want, want)
		}
	}
}

// BenchmarkTopicMetricsProduce is what a produce request adds for its topic: one lookup, the
// request counter, and one partition's records and bytes.
func BenchmarkTopicMetricsProduce(b *testing.B) {
	known := map[string]bool{}
	m := newTopicMetrics(500, func(name string) bool { return known[name] })
	var names []string
	for i := range 500 {
		name := fmt.Sprintf("topic-%d", i)
		known[name] = true
		names = append(names, name)
		m.topic(name)
	}
	hot := names[123]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := m.topic(hot)
			c.produceRequests.Add(1)
			c.recordsIn.Add(10)
			c.bytesIn.Add(1000)
		}
	})
}

// TestTopicMetricsConcurrentScrape: requests count while scrapes write and topics come and go (run
// under -race by make test): no data race, and no count lands twice (a deleted topic takes its
// counts with it).
func TestTopicMetricsConcurrentScrape(t *testing.T) {
	var known sync.Map
	for i := range 8 {
		known.Store(fmt.Sprintf("t%d", i), true)
	}
	m := newTopicMetrics(4, func(name string) bool { _, ok := known.Load(name); return ok })
	var wait sync.WaitGroup
	const perWorker = 2000
	for w := range 4 {
		wait.Add(1)
		go func() {
			defer wait.Done()
			for i := range perWorker {
				c := m.topic(fmt.Sprintf("t%d", (w+i)%8))
				c.recordsIn.Add(1)
				if i%100 == 0 {
					c.failed("Fetch", 1)
				}
			}
		}()
	}
	stop := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%10 == 0 { // a topic is deleted and re-created now and then
				known.Delete("t1")
				known.Store("t1", true)
			}
			m.write(io.Discard)
		}
	}()
	wait.Wait()
	close(stop)
	<-scraped
	total := m.other.recordsIn.Load()
	for _, c := range *m.byName.Load() {
		total += c.recordsIn.Load()
	}
	if total > 4*perWorker {
		t.Fatalf("%d records counted, only %d added", total, 4*perWorker)
	}
}
