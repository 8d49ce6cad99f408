package reqtime

import (
	"testing"
	"time"
)

// BenchmarkTimelineProduce records the five stages of a produce, as the broker does per request.
func BenchmarkTimelineProduce(b *testing.B) {
	b.ReportAllocs()
	received := time.Now()
	var sink time.Duration
	for b.Loop() {
		tl := Timeline{Received: received}
		tl.Record(Queue, received, received.Add(1))
		tl.Record(Append, received.Add(1), received.Add(2))
		tl.Record(Fsync, received.Add(2), received.Add(3))
		tl.Record(Replication, received.Add(3), received.Add(4))
		tl.Record(Send, received.Add(4), received.Add(5))
		sink += tl.End()
	}
	if sink < 0 {
		b.Fatal(sink)
	}
}
