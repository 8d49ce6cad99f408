package broker

// Per-topic traffic counters, exported at scrape time by WriteMetrics:
//
//	sluice_topic_produce_requests_total{topic}   produce requests naming the topic
//	sluice_topic_fetch_requests_total{topic}     consumer fetch responses naming the topic
//	sluice_topic_records_in_total{topic}         records appended by produce requests
//	sluice_topic_bytes_in_total{topic}           record-batch bytes appended by produce requests
//	sluice_topic_records_out_total{topic}        offsets handed to consumers (next offset after the
//	                                              last whole batch sent minus the fetch offset)
//	sluice_topic_bytes_out_total{topic}          record-batch bytes sent to consumers
//	sluice_topic_errors_total{topic,api,code}    partitions answered with an error, by Kafka code
//
// Follower fetches are replication, not consumption: they count in sluice_replication_* only.
//
// The label set is bounded: a broker exports at most maxTopics topics (Config.MetricsMaxTopics,
// --metrics-max-topics); traffic of any further topic, and of names no topic has (a produce to an
// unknown topic), counts under topic="__other". Only topics the registry holds get a series of
// their own, so clients cannot mint series, and a deleted topic's series go at the next scrape
// (freeing its place; counters of a re-created topic start again from zero, which Prometheus reads
// as a counter reset). A topic takes a place at its first request, or at a scrape, where the topics
// with a local replica that have none yet take the free places in name order. The same set bounds
// every topic-labelled family the broker writes: the per-partition gauges, follower lag, group lag
// and cleaner gauges of the other topics are left out (they still count in the per-broker and
// per-group totals).
//
// The hot path: a request looks its topic up once (an atomic load and a map read of a
// copy-on-write map) and then adds to atomic counters; no lock unless the topic is new.

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/protocol"
)

// otherTopic is the label of traffic past the cap and of unknown topic names.
const otherTopic = "__other"

// topicCounters are one topic's counters (or the shared __other ones).
type topicCounters struct {
	produceRequests, fetchRequests atomic.Uint64
	recordsIn, bytesIn             atomic.Uint64
	recordsOut, bytesOut           atomic.Uint64
	errors                         struct {
		sync.Mutex
		byKey map[topicErrorKey]uint64 // errors are rare: a locked map is cheap enough
	}
}

type topicErrorKey struct {
	api  string // "Produce" or "Fetch"
	code int16
}

func (c *topicCounters) failed(api string, code int16) {
	c.errors.Lock()
	if c.errors.byKey == nil {
		c.errors.byKey = map[topicErrorKey]uint64{}
	}
	c.errors.byKey[topicErrorKey{api, code}]++
	c.errors.Unlock()
}

// topicMetrics maps topic names to their counters, at most maxTopics of them.
type topicMetrics struct {
	maxTopics int
	// exists reports whether the broker holds a topic of that name (the registry).
	exists func(topic string) bool
	other  topicCounters
	byName atomic.Pointer[map[string]*topicCounters] // copy-on-write; replaced under mu
	mu     sync.Mutex
}

func newTopicMetrics(maxTopics int, exists func(string) bool) *topicMetrics {
	m := &topicMetrics{maxTopics: maxTopics, exists: exists}
	empty := map[string]*topicCounters{}
	m.byName.Store(&empty)
	return m
}

// topic returns the counters of a topic; once per topic per request.
func (m *topicMetrics) topic(name string) *topicCounters {
	if c, ok := (*m.byName.Load())[name]; ok {
		return c
	}
	return m.add(name)
}

func (m *topicMetrics) add(name string) *topicCounters {
	if name == otherTopic || !m.exists(name) {
		return &m.other
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	current := *m.byName.Load()
	if c, ok := current[name]; ok {
		return c
	}
	if len(current) >= m.maxTopics {
		return &m.other
	}
	next := make(map[string]*topicCounters, len(current)+1)
	for topic, c := range current {
		next[topic] = c
	}
	c := &topicCounters{}
	next[name] = c
	m.byName.Store(&next)
	return c
}

// has reports whether a topic has series of its own.
func (m *topicMetrics) has(name string) bool {
	_, ok := (*m.byName.Load())[name]
	return ok
}

// admit gives the topics named, in order, the free places (a scrape calls it with the topics it
// holds replicas of, sorted).
func (m *topicMetrics) admit(topics []string) {
	byName := *m.byName.Load()
	if len(byName) >= m.maxTopics {
		return
	}
	for _, topic := range topics {
		if _, ok := byName[topic]; !ok {
			if m.add(topic) == &m.other {
				return // full
			}
		}
	}
}

// prune drops the counters of topics the broker no longer holds.
func (m *topicMetrics) prune() {
	m.mu.Lock()
	defer m.mu.Unlock()
	current := *m.byName.Load()
	var gone []string
	for topic := range current {
		if !m.exists(topic) {
			gone = append(gone, topic)
		}
	}
	if len(gone) == 0 {
		return
	}
	next := make(map[string]*topicCounters, len(current))
	for topic, c := range current {
		next[topic] = c
	}
	for _, topic := range gone {
		delete(next, topic)
	}
	m.byName.Store(&next)
}

// write writes every family once, each topic a sample, __other last.
func (m *topicMetrics) write(w io.Writer) {
	m.prune()
	byName := *m.byName.Load()
	topics := make([]string, 0, len(byName))
	for topic := range byName {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	each := func(fn func(topic string, c *topicCounters)) {
		for _, topic := range topics {
			fn(topic, byName[topic])
		}
		fn(otherTopic, &m.other)
	}
	counter := func(family string, value func(c *topicCounters) uint64) {
		writeFamilyType(w, family, "counter")
		each(func(topic string, c *topicCounters) {
			fmt.Fprintf(w, "%s{topic=%q} %d\n", family, topic, value(c))
		})
	}
	counter("sluice_topic_produce_requests_total", func(c *topicCounters) uint64 { return c.produceRequests.Load() })
	counter("sluice_topic_fetch_requests_total", func(c *topicCounters) uint64 { return c.fetchRequests.Load() })
	counter("sluice_topic_records_in_total", func(c *topicCounters) uint64 { return c.recordsIn.Load() })
	counter("sluice_topic_bytes_in_total", func(c *topicCounters) uint64 { return c.bytesIn.Load() })
	counter("sluice_topic_records_out_total", func(c *topicCounters) uint64 { return c.recordsOut.Load() })
	counter("sluice_topic_bytes_out_total", func(c *topicCounters) uint64 { return c.bytesOut.Load() })
	writeFamilyType(w, "sluice_topic_errors_total", "counter")
	each(func(topic string, c *topicCounters) {
		c.errors.Lock()
		keys := make([]topicErrorKey, 0, len(c.errors.byKey))
		for key := range c.errors.byKey {
			keys = append(keys, key)
		}
		slices.SortFunc(keys, func(a, b topicErrorKey) int {
			if a.api != b.api {
				if a.api < b.api {
					return -1
				}
				return 1
			}
			return int(a.code) - int(b.code)
		})
		for _, key := range keys {
			fmt.Fprintf(w, "sluice_topic_errors_total{topic=%q,api=%q,code=%q} %d\n", topic, key.api, errorCodeLabel(key.code), c.errors.byKey[key])
		}
		c.errors.Unlock()
	})
}

// errorCodeLabel names a Kafka error code (its number when the table lacks it).
func errorCodeLabel(code int16) string {
	if name := protocol.ErrorCodeOf(code).Name; name != "" {
		return name
	}
	return fmt.Sprintf("%d", code)
}

// writeFamilyType writes a family's TYPE line (the HTTP handler adds the HELP text).
func writeFamilyType(w io.Writer, family, kind string) {
	fmt.Fprintf(w, "# TYPE %s %s\n", family, kind)
}

// countFetch counts a consumer fetch response: once per topic, then per partition.
func (m *topicMetrics) countFetch(results []fetchTopicResult) {
	for i := range results {
		topic := &results[i]
		counters := m.topic(topic.topic)
		counters.fetchRequests.Add(1)
		for j := range topic.partitions {
			p := &topic.partitions[j]
			if p.errorCode != 0 {
				counters.failed("Fetch", p.errorCode)
			}
			if p.slice.Size > 0 {
				counters.bytesOut.Add(uint64(p.slice.Size))
				counters.recordsOut.Add(uint64(max(p.slice.NextOffset-max(p.fetchOffset, p.slice.FirstOffset), 0)))
			}
		}
	}
}

// holdsTopic reports whether the cluster metadata the broker follows has the topic.
func (b *Broker) holdsTopic(name string) bool {
	_, ok := b.registry.snapshot()[name]
	return ok
}

// admitLocalTopics gives the topics this broker has a replica of the free places among the
// topics with series of their own, in name order; at every scrape, before writing.
func (b *Broker) admitLocalTopics() {
	m := b.metrics.topics
	m.prune()
	var local []string
	for name, t := range b.registry.snapshot() {
		if slices.ContainsFunc(t.partitions, func(p *partition) bool { return p != nil }) {
			local = append(local, name)
		}
	}
	slices.Sort(local)
	m.admit(local)
}
