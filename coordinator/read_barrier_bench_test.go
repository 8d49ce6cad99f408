package coordinator

import (
	"fmt"
	"testing"
)

// BenchmarkReadBarrier measures read barriers on a follower of a three-voter cluster (a forwarded
// read index, a quorum check on the controller, the local wait), with 1 and 64 readers in flight:
// readers share rounds, so the cost per reader falls as concurrency grows. Reported: rounds per
// reader.
func BenchmarkReadBarrier(b *testing.B) {
	tc := startCluster(b, 3)
	follower := tc.follower()
	for _, readers := range []int{1, 64} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			b.ReportAllocs()
			before := follower.metrics.readBarriers.Get()
			results := make(chan error, readers)
			n := 0
			for b.Loop() {
				for range readers {
					follower.ReadBarrier(func(err error) { results <- err })
				}
				for range readers {
					if err := <-results; err != nil {
						b.Fatal(err)
					}
				}
				n += readers
			}
			b.ReportMetric(float64(follower.metrics.readBarriers.Get()-before)/float64(n), "rounds/reader")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/reader")
		})
	}
}
