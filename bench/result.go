package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-mq/sluice/bench/histogram"
)

// Result is a run's outcome: from one process, or merged over agents. Counts and histograms cover
// the measured window (warm-up excluded); the timeline covers the whole run. Latencies are in
// microseconds in the histograms and milliseconds in the summary.
type Result struct {
	Workload        Workload             `json:"workload"`
	Driver          string               `json:"driver"`
	Brokers         []string             `json:"brokers"`
	Agents          []string             `json:"agents,omitempty"` // empty: everything ran in one process
	Topics          []string             `json:"topics"`
	Started         time.Time            `json:"started"`
	MeasuredSeconds float64              `json:"measured_seconds"`
	Producers       int                  `json:"producers"`
	Consumers       int                  `json:"consumers"`
	Published       int64                `json:"published"`
	PublishedBytes  int64                `json:"published_bytes"`
	PublishErrors   int64                `json:"publish_errors"`
	Consumed        int64                `json:"consumed"`
	ConsumedBytes   int64                `json:"consumed_bytes"`
	TotalPublished  int64                `json:"total_published"` // warm-up included
	TotalConsumed   int64                `json:"total_consumed"`
	BacklogAtEnd    int64                `json:"backlog_at_end"` // published, not yet consumed, summed over groups
	PublishLatency  *histogram.Histogram `json:"publish_latency_us"`
	EndToEndLatency *histogram.Histogram `json:"end_to_end_latency_us"`
	Timeline        []Interval           `json:"timeline"`
	Summary         Summary              `json:"summary"`
}

// Summary is the headline figures, computed from the rest by Summarize.
type Summary struct {
	PublishRate       float64   `json:"publish_msgs_per_s"`
	PublishMBps       float64   `json:"publish_mb_per_s"` // MB = 10^6 bytes
	ConsumeRate       float64   `json:"consume_msgs_per_s"`
	ConsumeMBps       float64   `json:"consume_mb_per_s"`
	PublishLatencyMs  Latencies `json:"publish_latency_ms"`
	EndToEndLatencyMs Latencies `json:"end_to_end_latency_ms"`
}

// Latencies are percentiles of one histogram, in milliseconds.
type Latencies struct {
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
	Count uint64  `json:"count"`
}

func latenciesOf(h *histogram.Histogram) Latencies {
	if h == nil {
		return Latencies{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latencies{P50: ms(h.Quantile(0.5)), P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)),
		Max: ms(h.Max()), Mean: h.Mean() / 1000, Count: h.Count()}
}

// Summarize fills in r.Summary.
func (r *Result) Summarize() {
	seconds := max(r.MeasuredSeconds, 1e-9)
	r.Summary = Summary{
		PublishRate: float64(r.Published) / seconds, PublishMBps: float64(r.PublishedBytes) / seconds / 1e6,
		ConsumeRate: float64(r.Consumed) / seconds, ConsumeMBps: float64(r.ConsumedBytes) / seconds / 1e6,
		PublishLatencyMs: latenciesOf(r.PublishLatency), EndToEndLatencyMs: latenciesOf(r.EndToEndLatency),
	}
}

// Merge combines the results of agents that ran shares of one plan: counts add, histograms merge
// exactly, timelines merge second by second, and the measured window is the longest agent's.
func Merge(parts []*Result, agents []string) *Result {
	if len(parts) == 0 {
		return &Result{}
	}
	first := parts[0]
	merged := &Result{
		Workload: first.Workload, Driver: first.Driver, Brokers: first.Brokers, Agents: agents, Topics: first.Topics,
		Started: first.Started, PublishLatency: histogram.New(), EndToEndLatency: histogram.New(),
	}
	bySecond := map[int]*Interval{}
	for _, part := range parts {
		if part.Started.Before(merged.Started) {
			merged.Started = part.Started
		}
		merged.MeasuredSeconds = max(merged.MeasuredSeconds, part.MeasuredSeconds)
		merged.Producers += part.Producers
		merged.Consumers += part.Consumers
		merged.Published += part.Published
		merged.PublishedBytes += part.PublishedBytes
		merged.PublishErrors += part.PublishErrors
		merged.Consumed += part.Consumed
		merged.ConsumedBytes += part.ConsumedBytes
		merged.TotalPublished += part.TotalPublished
		merged.TotalConsumed += part.TotalConsumed
		merged.PublishLatency.Merge(part.PublishLatency)
		merged.EndToEndLatency.Merge(part.EndToEndLatency)
		for _, interval := range part.Timeline {
			m := bySecond[interval.Second]
			if m == nil {
				m = &Interval{Second: interval.Second, Warmup: interval.Warmup, PublishLatency: histogram.New(), EndToEndLatency: histogram.New()}
				bySecond[interval.Second] = m
			}
			mergeInterval(m, interval)
		}
	}
	merged.BacklogAtEnd = merged.TotalPublished*int64(first.Workload.ConsumerGroups) - merged.TotalConsumed
	for _, second := range slices.Sorted(maps.Keys(bySecond)) {
		m := bySecond[second]
		m.Backlog = m.TotalPublished*int64(first.Workload.ConsumerGroups) - m.TotalConsumed
		merged.Timeline = append(merged.Timeline, *m)
	}
	merged.Summarize()
	return merged
}

func mergeInterval(into *Interval, from Interval) {
	into.Warmup = into.Warmup && from.Warmup
	into.Published += from.Published
	into.PublishedBytes += from.PublishedBytes
	into.PublishErrors += from.PublishErrors
	into.Consumed += from.Consumed
	into.ConsumedBytes += from.ConsumedBytes
	into.TotalPublished += from.TotalPublished
	into.TotalConsumed += from.TotalConsumed
	into.PublishLatency.Merge(from.PublishLatency)
	into.EndToEndLatency.Merge(from.EndToEndLatency)
}

// ProgressLine is the one-line live view of a second.
func ProgressLine(i Interval) string {
	phase := ""
	if i.Warmup {
		phase = " (warm-up)"
	}
	return fmt.Sprintf("%4ds%s  publish %s msg/s %6.1f MB/s p99 %s | consume %s msg/s e2e p99 %s | backlog %s",
		i.Second, phase, group(float64(i.Published)), float64(i.PublishedBytes)/1e6, msString(i.PublishLatency.Quantile(0.99)),
		group(float64(i.Consumed)), msString(i.EndToEndLatency.Quantile(0.99)), group(float64(i.Backlog)))
}

func msString(us int64) string { return fmt.Sprintf("%.2f ms", float64(us)/1000) }

// group writes n rounded, with thousands separated by commas.
func group(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	negative := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if negative {
		return "-" + b.String()
	}
	return b.String()
}

// WriteTable writes the final table.
func (r *Result) WriteTable(out io.Writer) {
	w := r.Workload
	where := "local process"
	if len(r.Agents) > 0 {
		where = fmt.Sprintf("%d agents (%s)", len(r.Agents), strings.Join(r.Agents, ", "))
	}
	fmt.Fprintf(out, "workload %s: %d topic(s) x %d partitions, %d B messages, keys %s, acks=%s, compression %s, rate %s\n",
		w.Name, w.Topics, w.Partitions, w.MessageSize, w.Keys, w.Acks, w.Compression, rateString(w.Rate))
	fmt.Fprintf(out, "driver %s, %d producer(s), %d consumer(s) in %d group(s) per topic, %s; measured %.1f s after %v warm-up\n\n",
		r.Driver, r.Producers, r.Consumers, w.ConsumerGroups, where, r.MeasuredSeconds, w.Warmup)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmsgs/s\tMB/s\tp50 ms\tp99 ms\tp99.9 ms\tmax ms\tcount\t")
	s := r.Summary
	row := func(name string, rate, mbps float64, l Latencies) {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t\n", name, group(rate), mbps, l.P50, l.P99, l.P999, l.Max, group(float64(l.Count)))
	}
	row("publish", s.PublishRate, s.PublishMBps, s.PublishLatencyMs)
	row("end-to-end", s.ConsumeRate, s.ConsumeMBps, s.EndToEndLatencyMs)
	tw.Flush()
	fmt.Fprintf(out, "\npublish errors %s; consumed %s records (%s msg/s); backlog at end %s records\n",
		group(float64(r.PublishErrors)), group(float64(r.Consumed)), group(s.ConsumeRate), group(float64(r.BacklogAtEnd)))
}

func rateString(rate int) string {
	if rate == 0 {
		return "max"
	}
	return group(float64(rate)) + " msg/s"
}
