package console

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

// sample is what the sampler saw at one moment.
type sample struct {
	At time.Time
	// TopicEnds is the sum of each topic's partitions' log end offsets.
	TopicEnds map[string]int64
	// TopicBytes is the sum of each topic's partitions' sizes (their leaders' replicas).
	TopicBytes map[string]int64
	// GroupLags is each group's lag per partition (lags' definition).
	GroupLags map[string]map[topicPartition]int64
	// TopicsCut and GroupsCut say the caps left some out.
	TopicsCut, GroupsCut bool
}

// sampleRing keeps the last len(samples) samples.
type sampleRing struct {
	mu struct {
		sync.Mutex
		samples []sample // ring; Invariant: count <= len(samples)
		next    int      // where the next sample goes
		count   int
	}
}

func newSampleRing(size int) *sampleRing {
	r := &sampleRing{}
	r.mu.samples = make([]sample, size)
	return r
}

func (r *sampleRing) add(s sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.samples[r.mu.next] = s
	r.mu.next = (r.mu.next + 1) % len(r.mu.samples)
	r.mu.count = min(r.mu.count+1, len(r.mu.samples))
}

// snapshot returns the samples, oldest first. Samples are never changed once added, so the
// caller may read the maps without the lock.
func (r *sampleRing) snapshot() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]sample, 0, r.mu.count)
	start := (r.mu.next - r.mu.count + len(r.mu.samples)) % len(r.mu.samples)
	for i := 0; i < r.mu.count; i++ {
		out = append(out, r.mu.samples[(start+i)%len(r.mu.samples)])
	}
	return out
}

// point is one value of a chart's series.
type point struct {
	At    time.Time
	Value float64
}

// rates turns consecutive samples of a growing count into per-second rates; end returns the
// count in a sample and whether the sample has it. A count that went down (a topic deleted and
// made again) gives no point.
func rates(samples []sample, end func(sample) (int64, bool)) []point {
	var out []point
	for i := 1; i < len(samples); i++ {
		before, ok1 := end(samples[i-1])
		after, ok2 := end(samples[i])
		seconds := samples[i].At.Sub(samples[i-1].At).Seconds()
		if !ok1 || !ok2 || after < before || seconds <= 0 {
			continue
		}
		out = append(out, point{samples[i].At, float64(after-before) / seconds})
	}
	return out
}

func topicRate(samples []sample, topic string) []point {
	return rates(samples, func(s sample) (int64, bool) {
		end, ok := s.TopicEnds[topic]
		return end, ok
	})
}

// totalBytesRate is the growth of all logs in bytes per second: what was appended, as stored
// (compressed batches with their headers); a sample where retention or compaction shrank the
// logs gives no point.
func totalBytesRate(samples []sample) []point {
	return rates(samples, func(s sample) (int64, bool) {
		var total int64
		for _, size := range s.TopicBytes {
			total += size
		}
		return total, true
	})
}

func topicBytesRate(samples []sample, topic string) []point {
	return rates(samples, func(s sample) (int64, bool) {
		size, ok := s.TopicBytes[topic]
		return size, ok
	})
}

func totalRate(samples []sample) []point {
	return rates(samples, func(s sample) (int64, bool) {
		var total int64
		for _, end := range s.TopicEnds {
			total += end
		}
		return total, true
	})
}

// groupLagSeries returns the group's total lag over time and, for the maxLines partitions with
// the most lag now, each partition's.
func groupLagSeries(samples []sample, group string, maxLines int) (total []point, partitions map[topicPartition][]point) {
	partitions = map[topicPartition][]point{}
	for _, s := range samples {
		lags, ok := s.GroupLags[group]
		if !ok {
			continue
		}
		var sum int64
		for tp, lag := range lags {
			sum += lag
			partitions[tp] = append(partitions[tp], point{s.At, float64(lag)})
		}
		total = append(total, point{s.At, float64(sum)})
	}
	if len(partitions) > maxLines {
		keys := make([]topicPartition, 0, len(partitions))
		for tp := range partitions {
			keys = append(keys, tp)
		}
		last := func(tp topicPartition) float64 { series := partitions[tp]; return series[len(series)-1].Value }
		sort.Slice(keys, func(i, j int) bool { return last(keys[i]) > last(keys[j]) })
		for _, tp := range keys[maxLines:] {
			delete(partitions, tp)
		}
	}
	return total, partitions
}

// takeSample asks the cluster for log end offsets and group offsets.
func takeSample(ctx context.Context, raw *kgo.Client, c *client.Client, cfg Config, now time.Time) (sample, error) {
	s := sample{At: now, TopicEnds: map[string]int64{}, TopicBytes: map[string]int64{}, GroupLags: map[string]map[topicPartition]int64{}}
	cluster, err := metadata(ctx, raw)
	if err != nil {
		return s, err
	}
	if len(cluster.Topics) > cfg.MaxSampledTopics {
		cluster.Topics, s.TopicsCut = cluster.Topics[:cfg.MaxSampledTopics], true
	}
	if err := fillOffsets(ctx, raw, cluster); err != nil {
		return s, err
	}
	fillSizes(ctx, raw, cluster)
	for _, t := range cluster.Topics {
		var sum int64
		for _, p := range t.Partitions {
			sum += max(p.LogEnd, 0)
		}
		s.TopicEnds[t.Name] = sum
		s.TopicBytes[t.Name] = t.sizeBytes()
	}
	groups, err := listGroups(ctx, raw)
	if err != nil {
		return s, err
	}
	if len(groups) > cfg.MaxSampledGroups {
		groups, s.GroupsCut = groups[:cfg.MaxSampledGroups], true
	}
	var names, shareGroups []string
	for _, g := range groups {
		if g.Type == "share" { // no committed offsets: the share coordinator knows their lag
			shareGroups = append(shareGroups, g.Name)
		} else {
			names = append(names, g.Name)
		}
	}
	if c != nil {
		sampleShareGroups(ctx, c, shareGroups, &s)
	}
	committedByGroup, err := committedOffsetsOfGroups(ctx, raw, names)
	if err != nil {
		return s, err
	}
	for name, committed := range committedByGroup {
		rows, _ := lags(cluster, committed)
		perPartition := make(map[topicPartition]int64, len(rows))
		for _, row := range rows {
			perPartition[topicPartition{row.Topic, row.Partition}] = row.Lag
		}
		s.GroupLags[name] = perPartition
	}
	return s, nil
}

// runSampler takes a sample every interval until stop closes.
func (c *Console) runSampler(stop <-chan struct{}) {
	ticker := time.NewTicker(c.cfg.SampleInterval)
	defer ticker.Stop()
	failing := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		s, err := takeSample(ctx, c.shared.raw, c.shared.client, c.cfg, time.Now())
		cancel()
		if err == nil {
			c.samples.add(s)
			failing = false
		} else if !failing {
			c.logger.Warn("console: sample failed", "err", err) // once per failing stretch
			failing = true
		}
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
	}
}

// visibleSamples returns the samples as r's user may see them: without login all of them; with
// login only the topics the user's Metadata lists (the broker leaves out those it may not
// describe), so the sampler's principal shows no one a topic their ACLs hide.
func (c *Console) visibleSamples(ctx context.Context, r *http.Request) []sample {
	samples := c.samples.snapshot()
	if c.cfg.SASLMechanism == "" || len(samples) == 0 {
		return samples
	}
	visible := map[string]bool{}
	if cluster, err := metadata(ctx, kafkaOf(r).raw); err == nil {
		for _, t := range cluster.Topics {
			visible[t.Name] = true
		}
	}
	out := make([]sample, len(samples))
	for i, s := range samples {
		filtered := sample{At: s.At, TopicEnds: map[string]int64{}, TopicBytes: map[string]int64{}, GroupLags: map[string]map[topicPartition]int64{}, TopicsCut: s.TopicsCut, GroupsCut: s.GroupsCut}
		for topic, end := range s.TopicEnds {
			if visible[topic] {
				filtered.TopicEnds[topic] = end
			}
		}
		for topic, size := range s.TopicBytes {
			if visible[topic] {
				filtered.TopicBytes[topic] = size
			}
		}
		for group, lags := range s.GroupLags {
			shown := map[topicPartition]int64{}
			for tp, lag := range lags {
				if visible[tp.Topic] {
					shown[tp] = lag
				}
			}
			filtered.GroupLags[group] = shown
		}
		out[i] = filtered
	}
	return out
}
