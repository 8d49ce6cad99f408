package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// chartSeries is one line of a chart.
type chartSeries struct {
	Name   string
	Points []point
}

// lineChart draws series as inline SVG over the window [now-span, now], y from 0 to a rounded
// maximum, with a legend giving each series' latest value in unit.
func lineChart(series []chartSeries, now time.Time, span time.Duration, unit string, width, height int) template.HTML {
	var out strings.Builder
	const left, right, top, bottom = 48, 8, 8, 18
	plotWidth, plotHeight := float64(width-left-right), float64(height-top-bottom)
	peak := 0.0
	points := 0
	for _, s := range series {
		for _, p := range s.Points {
			peak = math.Max(peak, p.Value)
			points++
		}
	}
	peak = niceCeiling(peak)
	fmt.Fprintf(&out, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="chart">`, width, height, width, height)
	for i := 0; i <= 4; i++ {
		y := float64(top) + plotHeight*float64(i)/4
		fmt.Fprintf(&out, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, left, y, width-right, y)
		fmt.Fprintf(&out, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`, left-4, y+4, template.HTMLEscapeString(shortNumber(peak*float64(4-i)/4)))
	}
	fmt.Fprintf(&out, `<text class="axis" x="%d" y="%d">-%s</text>`, left, height-4, template.HTMLEscapeString(span.Round(time.Second).String()))
	fmt.Fprintf(&out, `<text class="axis" x="%d" y="%d" text-anchor="end">now</text>`, width-right, height-4)
	if points == 0 {
		fmt.Fprintf(&out, `<text class="empty" x="%d" y="%d" text-anchor="middle">collecting samples…</text>`, left+int(plotWidth/2), top+int(plotHeight/2))
	}
	start := now.Add(-span)
	for i, s := range series {
		if len(s.Points) == 0 {
			continue
		}
		var path strings.Builder
		for _, p := range s.Points {
			x := float64(left) + plotWidth*math.Max(0, float64(p.At.Sub(start))/float64(span))
			y := float64(top) + plotHeight*(1-p.Value/math.Max(peak, 1e-9))
			fmt.Fprintf(&path, "%.1f,%.1f ", x, y)
		}
		fmt.Fprintf(&out, `<polyline class="line s%d" points="%s"><title>%s</title></polyline>`, i%8, strings.TrimSpace(path.String()), template.HTMLEscapeString(s.Name))
	}
	out.WriteString(`</svg>`)
	if len(series) > 0 {
		out.WriteString(`<ul class="legend">`)
		for i, s := range series {
			latest := "-"
			if n := len(s.Points); n > 0 {
				latest = shortNumber(s.Points[n-1].Value) + unit
			}
			fmt.Fprintf(&out, `<li><span class="swatch s%d"></span>%s <b>%s</b></li>`, i%8, template.HTMLEscapeString(s.Name), template.HTMLEscapeString(latest))
		}
		out.WriteString(`</ul>`)
	}
	return template.HTML(out.String())
}

// sparkline draws one series small, without axes, over [now-span, now].
func sparkline(points []point, now time.Time, span time.Duration) template.HTML {
	const width, height = 120, 24
	peak := 0.0
	for _, p := range points {
		peak = math.Max(peak, p.Value)
	}
	var path strings.Builder
	start := now.Add(-span)
	for _, p := range points {
		x := width * math.Max(0, float64(p.At.Sub(start))/float64(span))
		y := 1 + (height-2)*(1-p.Value/math.Max(peak, 1e-9))
		fmt.Fprintf(&path, "%.1f,%.1f ", x, y)
	}
	title := "no samples yet"
	if n := len(points); n > 0 {
		title = fmt.Sprintf("%s records/s now, peak %s", shortNumber(points[n-1].Value), shortNumber(peak))
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" viewBox="0 0 %d %d" width="%d" height="%d"><title>%s</title><polyline class="line s0" points="%s"/></svg>`,
		width, height, width, height, template.HTMLEscapeString(title), strings.TrimSpace(path.String())))
}

// niceCeiling rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeiling(v float64) float64 {
	if v <= 1 {
		return 1
	}
	magnitude := math.Pow(10, math.Floor(math.Log10(v)))
	for _, step := range []float64{1, 2, 5, 10} {
		if v <= step*magnitude {
			return step * magnitude
		}
	}
	return 10 * magnitude
}

// shortNumber prints v with at most three significant digits and a k/M/G suffix.
func shortNumber(v float64) string {
	switch abs := math.Abs(v); {
	case abs >= 1e9:
		return trimZeros(fmt.Sprintf("%.3g", v/1e9)) + "G"
	case abs >= 1e6:
		return trimZeros(fmt.Sprintf("%.3g", v/1e6)) + "M"
	case abs >= 1e3:
		return trimZeros(fmt.Sprintf("%.3g", v/1e3)) + "k"
	case abs == math.Trunc(abs):
		return fmt.Sprintf("%.0f", v)
	}
	return trimZeros(fmt.Sprintf("%.3g", v))
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") && !strings.ContainsAny(s, "e") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// bytesText prints a byte count in binary units; negative means unknown.
func bytesText(n int64) string {
	if n < 0 {
		return "-"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		value /= unit
		suffix = s
		if value < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s", value, suffix)
}
