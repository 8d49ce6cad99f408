package broker

// Consumer lag, computed at scrape time for the partitions this broker leads:
//
//	sluice_group_lag_records{group,topic,partition}   high watermark minus the committed offset
//	sluice_group_lag_seconds{group,topic,partition}   now minus the append time of the oldest
//	                                                   unconsumed record; 0 when caught up
//	sluice_group_total_lag_records{group}              the group's records lag over those partitions
//	sluice_group_max_lag_seconds{group}                its largest seconds lag over them
//	sluice_share_group_lag_records{group,topic,partition}, sluice_share_group_lag_seconds{...}:
//	                                                   the same for share groups (KIP-932), from the
//	                                                   share-partition start offset, for the share
//	                                                   partitions this broker has loaded
//
// Each broker reports the partitions it leads, so a group's lag over a cluster is
// sum by (group) (sluice_group_total_lag_records) and max by (group) (sluice_group_max_lag_seconds).
// Per-partition series are written for the topics with series of their own only
// (--metrics-max-topics, metrics_topics.go); the per-group totals cover every partition.
//
// The oldest unconsumed record is the one at the committed offset (or the log start, when retention
// already removed it). Its time is read from the header of the batch holding it, one header read per
// lagging partition: the batch's base timestamp, or its max timestamp for LogAppendTime batches
// (every record of such a batch carries the append time). With CreateTime this is the producer's
// clock, as in Kafka's time index; a producer clock ahead of the broker's reads as less lag.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/coordinator"
)

// lagSeconds is the age, at now, of the record at offset in p's log (0 at or past the high
// watermark); false when the log cannot tell (read error, damaged data).
func lagSeconds(p *partition, offset, highWatermark int64, now time.Time) (float64, bool) {
	offset = max(offset, p.log.LogStartOffset())
	if offset >= highWatermark {
		return 0, true
	}
	// A one-byte budget gives the batch holding offset alone (KIP-74), without walking further.
	slice, err := p.log.Slice(offset, 1, p.log.LogEndOffset())
	if err != nil || slice.Size < batch.HeaderSize {
		return 0, false
	}
	var raw [batch.HeaderSize]byte
	if _, err := slice.File.ReadAt(raw[:], slice.Position); err != nil {
		return 0, false
	}
	h, err := batch.ParseHeader(raw[:])
	if err != nil {
		return 0, false
	}
	appended := h.BaseTimestamp
	if h.Attributes&batch.AttributeLogAppendTime != 0 {
		appended = h.MaxTimestamp
	}
	return max(float64(now.UnixMilli()-appended)/1000, 0), true
}

type lagSample struct {
	group, topic string
	partition    int32
	records      int64
	seconds      float64
	secondsKnown bool
}

func (b *Broker) writeGroupLag(w io.Writer) {
	now := time.Now()
	var classic []lagSample
	offsets := b.coordinator.Offsets()
	for _, groupID := range offsets.Groups() {
		committed := offsets.Group(groupID)
		for tp, offset := range committed {
			p, err := b.registry.partition(tp.Topic, tp.Partition)
			if err != nil {
				continue // not led here: its leader reports it
			}
			classic = append(classic, b.lagOf(p, groupID, tp, offset.Offset, now))
		}
	}
	writeLagSamples(w, "sluice_group", classic, true, b.metrics.topics.has)

	var shared []lagSample
	type loaded struct {
		key   sharePartitionKey
		start int64
		lag   int64
		p     *partition
	}
	var partitions []loaded
	m := b.shares
	m.mu.Lock()
	for key, e := range m.mu.partitions {
		p, err := b.registry.partition(key.topic, key.partition)
		if err != nil || p.topicID != e.topicID {
			continue
		}
		partitions = append(partitions, loaded{key, e.state.StartOffset(), e.state.Lag(p.replica.HighWatermark()), p})
	}
	m.mu.Unlock()
	for _, l := range partitions {
		sample := lagSample{group: l.key.group, topic: l.key.topic, partition: l.key.partition, records: max(l.lag, 0)}
		sample.seconds, sample.secondsKnown = lagSeconds(l.p, l.start, l.p.replica.HighWatermark(), now)
		shared = append(shared, sample)
	}
	writeLagSamples(w, "sluice_share_group", shared, false, b.metrics.topics.has)
}

func (b *Broker) lagOf(p *partition, group string, tp coordinator.TopicPartition, committed int64, now time.Time) lagSample {
	high := p.replica.HighWatermark()
	sample := lagSample{group: group, topic: tp.Topic, partition: tp.Partition, records: max(high-max(committed, p.log.LogStartOffset()), 0)}
	sample.seconds, sample.secondsKnown = lagSeconds(p, committed, high, now)
	return sample
}

// writeLagSamples writes the per-partition families of prefix, sorted, for the exported topics, and
// for classic groups the per-group sums over all of them.
func writeLagSamples(w io.Writer, prefix string, samples []lagSample, perGroup bool, exported func(topic string) bool) {
	slices.SortFunc(samples, func(a, b lagSample) int {
		if c := strings.Compare(a.group, b.group); c != 0 {
			return c
		}
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition) - int(b.partition)
	})
	labels := func(s lagSample) string {
		return fmt.Sprintf(`{group=%q,topic=%q,partition="%d"}`, s.group, s.topic, s.partition)
	}
	writeFamilyType(w, prefix+"_lag_records", "gauge")
	for _, s := range samples {
		if exported(s.topic) {
			fmt.Fprintf(w, "%s_lag_records%s %d\n", prefix, labels(s), s.records)
		}
	}
	writeFamilyType(w, prefix+"_lag_seconds", "gauge")
	for _, s := range samples {
		if s.secondsKnown && exported(s.topic) {
			fmt.Fprintf(w, "%s_lag_seconds%s %.3f\n", prefix, labels(s), s.seconds)
		}
	}
	if !perGroup {
		return
	}
	type total struct {
		records int64
		seconds float64
	}
	var groups []string
	totals := map[string]*total{}
	for _, s := range samples {
		t, ok := totals[s.group]
		if !ok {
			t = &total{}
			totals[s.group] = t
			groups = append(groups, s.group)
		}
		t.records += s.records
		t.seconds = max(t.seconds, s.seconds)
	}
	writeFamilyType(w, prefix+"_total_lag_records", "gauge")
	for _, g := range groups {
		fmt.Fprintf(w, "%s_total_lag_records{group=%q} %d\n", prefix, g, totals[g].records)
	}
	writeFamilyType(w, prefix+"_max_lag_seconds", "gauge")
	for _, g := range groups {
		fmt.Fprintf(w, "%s_max_lag_seconds{group=%q} %.3f\n", prefix, g, totals[g].seconds)
	}
}
