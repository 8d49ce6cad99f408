package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WriteChart writes an SVG of the run's timeline: throughput (published and consumed msg/s) above,
// latency (publish p50 and p99, end-to-end p99, in ms) below; the warm-up is shaded.
func (r *Result) WriteChart(out io.Writer) error {
	const width, panelHeight, top, gap = 960, 260, 50, 70
	height := top + 2*panelHeight + gap + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("sluice bench: %s, driver %s, acks=%s, %d B: %s msg/s, publish p99 %.2f ms, end-to-end p99 %.2f ms",
		r.Workload.Name, r.Driver, r.Workload.Acks, r.Workload.MessageSize, group(r.Summary.PublishRate),
		r.Summary.PublishLatencyMs.P99, r.Summary.EndToEndLatencyMs.P99)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14" font-weight="bold">%s</text>`+"\n", 60, html.EscapeString(title))

	seconds := make([]float64, len(r.Timeline))
	published, consumed := make([]float64, len(r.Timeline)), make([]float64, len(r.Timeline))
	p50, p99, e2e99 := make([]float64, len(r.Timeline)), make([]float64, len(r.Timeline)), make([]float64, len(r.Timeline))
	warmupEnd := 0.0
	for i, interval := range r.Timeline {
		seconds[i] = float64(interval.Second)
		published[i], consumed[i] = float64(interval.Published), float64(interval.Consumed)
		p50[i] = float64(interval.PublishLatency.Quantile(0.5)) / 1000
		p99[i] = float64(interval.PublishLatency.Quantile(0.99)) / 1000
		e2e99[i] = float64(interval.EndToEndLatency.Quantile(0.99)) / 1000
		if interval.Warmup {
			warmupEnd = seconds[i]
		}
	}
	panel := chartPanel{left: 80, top: top, width: width - 120, height: panelHeight, seconds: seconds, warmupEnd: warmupEnd}
	panel.draw(&b, "throughput (msg/s)", []series{{"published", "#1f77b4", published}, {"consumed", "#2ca02c", consumed}})
	panel.top += panelHeight + gap
	panel.draw(&b, "latency (ms)", []series{{"publish p50", "#9467bd", p50}, {"publish p99", "#d62728", p99}, {"end-to-end p99", "#ff7f0e", e2e99}})
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds since start</text>`+"\n", panel.left+panel.width/2, height-8)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

type series struct {
	name   string
	color  string
	values []float64
}

type chartPanel struct {
	left, top, width, height int
	seconds                  []float64
	warmupEnd                float64
}

func (p chartPanel) draw(b *strings.Builder, label string, lines []series) {
	maxX := 1.0
	if n := len(p.seconds); n > 0 {
		maxX = max(p.seconds[n-1], 1)
	}
	maxY := 0.0
	for _, s := range lines {
		for _, v := range s.values {
			maxY = max(maxY, v)
		}
	}
	maxY = niceCeiling(maxY)
	x := func(v float64) float64 { return float64(p.left) + v/maxX*float64(p.width) }
	y := func(v float64) float64 { return float64(p.top+p.height) - v/maxY*float64(p.height) }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", p.left, p.top-8, html.EscapeString(label))
	if p.warmupEnd > 0 {
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eeeeee"/>`+"\n", x(0), p.top, x(p.warmupEnd)-x(0), p.height)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="#888888">warm-up</text>`+"\n", x(0)+4, p.top+14)
	}
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", p.left, y(v), p.left+p.width, y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", p.left-6, y(v)+4, axisLabel(v))
	}
	for i := 0; i <= 5; i++ {
		v := maxX * float64(i) / 5
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", x(v), p.top+p.height+16, v)
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>`+"\n", p.left, p.top, p.width, p.height)
	for i, s := range lines {
		if len(s.values) > 0 {
			var points []string
			for j, v := range s.values {
				points = append(points, fmt.Sprintf("%.1f,%.1f", x(p.seconds[j]), y(v)))
			}
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(points, " "))
		}
		lx := p.left + p.width - 150
		ly := p.top + 16 + 16*i
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", lx, ly-4, lx+20, ly-4, s.color)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+26, ly, html.EscapeString(s.name))
	}
}

// niceCeiling rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeiling(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	magnitude := math.Pow(10, math.Floor(math.Log10(v)))
	for _, step := range []float64{1, 2, 5, 10} {
		if step*magnitude >= v {
			return step * magnitude
		}
	}
	return 10 * magnitude
}

func axisLabel(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}
