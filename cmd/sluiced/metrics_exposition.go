package main

// The /metrics exposition. The metrics library writes samples without HELP text, and the broker's
// scrape-time writers emit some families interleaved (one partition's gauges, then the next
// partition's), so the handler regroups what they write into families, each once, led by its
// `# HELP` (metrics_help.go) and `# TYPE` lines: what `promtool check metrics` and Prometheus expect.
//
// A family a writer declared with a `# TYPE` line but has no samples for now (no share groups, no
// errors yet) is still listed, so /metrics names every family the broker can export.
//
// Types: a `# TYPE` line a writer gave wins; otherwise `_bucket` samples with an le label make a
// histogram, samples with a quantile label a summary, a `_total` suffix a counter, anything else a
// gauge. A few of the library's process metrics break Prometheus' naming rules; they are renamed
// (processRenames) and their types corrected.

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// processRenames gives Prometheus names to the library's Go runtime metrics that lack them (a
// counter without _total, a gauge with _count).
var processRenames = map[string]string{
	"go_cgo_calls_count": "go_cgo_calls_total",
	"go_gc_forced_count": "go_gc_forced_total",
	"go_cpu_count":       "go_cpus",
}

func writeExposition(w io.Writer, set *metrics.Set) {
	var raw bytes.Buffer
	set.WritePrometheus(&raw)
	metrics.WriteProcessMetrics(&raw)
	metrics.WriteFDMetrics(&raw) // process_open_fds, process_max_fds: open files
	w.Write(annotateExposition(raw.Bytes()))
}

type sample struct {
	name string // the metric name, renamed
	line string // the whole sample line, renamed; empty for a # TYPE line (declares the family)
}

type family struct {
	name    string
	kind    string
	samples []string
}

// annotateExposition regroups a text exposition into families with HELP and TYPE lines.
func annotateExposition(raw []byte) []byte {
	declared := map[string]string{} // family -> type from # TYPE lines
	histograms, summaries := map[string]bool{}, map[string]bool{}
	var samples []sample
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "# TYPE "):
			if fields := strings.Fields(line); len(fields) == 4 {
				declared[rename(fields[2])] = fields[3]
				samples = append(samples, sample{name: rename(fields[2])})
			}
			continue
		case strings.HasPrefix(line, "#"):
			continue // HELP lines (empty ones from the library) and comments
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue // not a sample
		}
		name := rename(line[:end])
		rest := line[end:]
		labels := ""
		if strings.HasPrefix(rest, "{") {
			if close := strings.LastIndexByte(rest, '}'); close > 0 {
				labels = rest[:close+1]
			}
		}
		if base, ok := strings.CutSuffix(name, "_bucket"); ok && strings.Contains(labels, `le="`) {
			histograms[base] = true
		}
		if strings.Contains(labels, `quantile="`) {
			summaries[name] = true
		}
		samples = append(samples, sample{name: name, line: name + rest})
	}
	var order []*family
	byName := map[string]*family{}
	for _, s := range samples {
		familyName := s.name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(s.name, suffix); ok && (histograms[base] || summaries[base] || declared[base] == "histogram" || declared[base] == "summary") {
				familyName = base
				break
			}
		}
		f, ok := byName[familyName]
		if !ok {
			f = &family{name: familyName, kind: familyType(familyName, declared, histograms, summaries)}
			byName[familyName] = f
			order = append(order, f)
		}
		if s.line != "" {
			f.samples = append(f.samples, s.line)
		}
	}
	var out bytes.Buffer
	out.Grow(len(raw) + len(order)*80)
	for _, f := range order {
		fmt.Fprintf(&out, "# HELP %s %s\n# TYPE %s %s\n", f.name, metricHelp(f.name), f.name, f.kind)
		for _, line := range f.samples {
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

func rename(name string) string {
	if renamed, ok := processRenames[name]; ok {
		return renamed
	}
	return name
}

func familyType(name string, declared map[string]string, histograms, summaries map[string]bool) string {
	switch {
	case strings.HasSuffix(name, "_total"):
		return "counter" // also the library's process_io_*_total, which it calls gauges
	case declared[name] != "":
		return declared[name]
	case histograms[name]:
		return "histogram"
	case summaries[name]:
		return "summary"
	}
	return "gauge"
}
