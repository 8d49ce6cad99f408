package chaos

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/sluice-mq/sluice/chaos/history"
)

// WriteTimeline draws the run as an SVG: acknowledged and failed sends per second, with each
// fault as a shaded band labelled with its number and kind, and the heal phase marked.
func WriteTimeline(out io.Writer, events []history.Event) error {
	var acked, failed []float64
	bump := func(series *[]float64, t int64) {
		second := int(t / 1e9)
		for len(*series) <= second {
			*series = append(*series, 0)
		}
		(*series)[second]++
	}
	type band struct {
		from, to int64
		label    string
	}
	var bands []band
	open := map[int64]int{}
	heal := int64(-1)
	end := int64(0)
	for _, e := range events {
		end = max(end, e.Time)
		switch {
		case e.F == history.Send && e.Type == history.OK:
			bump(&acked, e.Time)
		case e.F == history.Send && (e.Type == history.Info || e.Type == history.Fail):
			bump(&failed, e.Time)
		case e.F == history.FaultStart:
			open[e.Op] = len(bands)
			bands = append(bands, band{e.Time, -1, fmt.Sprintf("#%d %s %v", e.Op, e.Fault, e.Nodes)})
		case e.F == history.FaultEnd:
			if i, ok := open[e.Op]; ok {
				bands[i].to = e.Time
			}
		case e.F == history.Phase && e.Detail == "heal":
			heal = e.Time
		}
	}
	for len(failed) < len(acked) {
		failed = append(failed, 0)
	}
	for len(acked) < len(failed) {
		acked = append(acked, 0)
	}
	const width, height, left, top, plotHeight = 1200, 420, 70, 40, 300
	plotWidth := width - left - 30
	seconds := max(float64(end)/1e9, 1)
	peak := 1.0
	for i := range acked {
		peak = max(peak, acked[i], failed[i])
	}
	peak = niceCeiling(peak)
	x := func(t float64) float64 { return float64(left) + t/seconds*float64(plotWidth) }
	y := func(v float64) float64 { return float64(top+plotHeight) - v/peak*float64(plotHeight) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">sluice chaos: sends per second (acknowledged, failed) and faults</text>`+"\n", left)
	colors := []string{"#fdd0a2", "#c6dbef", "#d9f0a3", "#dadaeb"}
	for i, band := range bands {
		to := band.to
		if to < 0 {
			to = end
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.7"><title>%s</title></rect>`+"\n",
			x(float64(band.from)/1e9), top, max(x(float64(to)/1e9)-x(float64(band.from)/1e9), 1), plotHeight, colors[i%len(colors)], html.EscapeString(band.label))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="9" transform="rotate(90 %.1f %d)">%s</text>`+"\n",
			x(float64(band.from)/1e9)+2, top+4, x(float64(band.from)/1e9)+2, top+4, html.EscapeString(band.label))
	}
	if heal >= 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black" stroke-dasharray="4 3"/><text x="%.1f" y="%d">heal</text>`+"\n",
			x(float64(heal)/1e9), x(float64(heal)/1e9), top, top+plotHeight, x(float64(heal)/1e9)+3, top+plotHeight-4)
	}
	for _, s := range []struct {
		values []float64
		color  string
		name   string
	}{{acked, "#1f77b4", "acknowledged/s"}, {failed, "#d62728", "failed or unknown/s"}} {
		var points strings.Builder
		for i, v := range s.values {
			fmt.Fprintf(&points, "%.1f,%.1f ", x(float64(i)+0.5), y(v))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", s.color, points.String())
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", left, top, plotWidth, plotHeight)
	for i := 0; i <= 4; i++ {
		v := peak * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y(v)+4, v)
	}
	step := niceCeiling(seconds / 10)
	for t := 0.0; t <= seconds; t += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", x(t), top+plotHeight+16, t)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds since start</text>`+"\n", left+plotWidth/2, top+plotHeight+36)
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#1f77b4">acknowledged sends/s</text><text x="%d" y="%d" fill="#d62728">failed or indeterminate sends/s</text>`+"\n",
		left, height-20, left+180, height-20)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

// niceCeiling rounds v up to 1, 2 or 5 times a power of ten.
func niceCeiling(v float64) float64 {
	if v <= 0 {
		return 1
	}
	scale := 1.0
	for scale*10 <= v {
		scale *= 10
	}
	for scale > v {
		scale /= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*scale >= v {
			return m * scale
		}
	}
	return 10 * scale
}
