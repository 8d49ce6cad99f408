package coordinator

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkControllerFailover measures how long a three-voter cluster takes
// from closing its controller to the moment every survivor names a new,
// caught-up controller. The stopped node is restarted (untimed) before the
// next round. Reported: median and maximum in milliseconds.
func BenchmarkControllerFailover(b *testing.B) {
	tc := startCluster(b, 3)
	var took []time.Duration
	for b.Loop() {
		old := tc.controller().NodeID()
		start := time.Now()
		tc.stop(old)
		tc.controller()
		took = append(took, time.Since(start))
		b.StopTimer()
		tc.restart(old)
		tc.controller()
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
}
