package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkApplyNoop measures one round through Raft on a single node:
// encode, append to the raft-boltdb log (with fsync), commit, apply.
func BenchmarkApplyNoop(b *testing.B) {
	c := openTest(b, testConfig(b.TempDir()))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.propose(ctx, &noopCommand{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateTopic measures CreateTopic end to end, per partition count:
// validation, placement, Raft commit and the copy-on-write apply.
func BenchmarkCreateTopic(b *testing.B) {
	for _, partitions := range []int32{1, 64} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			c := openTest(b, testConfig(b.TempDir()))
			ctx := context.Background()
			for id := int32(1); id <= 3; id++ {
				if err := c.RegisterBroker(ctx, Broker{NodeID: id, Host: "127.0.0.1", Port: 9090 + id}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := c.CreateTopic(ctx, fmt.Sprintf("topic-%d", i), partitions, 3, nil, false); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkMetadata measures the read path brokers take on every request.
func BenchmarkMetadata(b *testing.B) {
	c := openTest(b, testConfig(b.TempDir()))
	b.ReportAllocs()
	for b.Loop() {
		if c.Metadata() == nil {
			b.Fatal("nil metadata")
		}
	}
}

// BenchmarkCommitOffsets measures the offset commit path through the batcher: parallel callers each
// commit one group's offsets for 8 partitions and wait for their entry to apply. Reports offsets/s.
func BenchmarkCommitOffsets(b *testing.B) {
	c := openTest(b, testConfig(b.TempDir()))
	b.ReportAllocs()
	b.SetParallelism(16)
	var groups atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		group := fmt.Sprintf("g%d", groups.Add(1))
		done := make(chan error, 1)
		offset := int64(0)
		for pb.Next() {
			offset++
			commits := make([]OffsetCommit, 8)
			for p := range commits {
				commits[p] = commitOf(group, "t", int32(p), offset)
			}
			c.CommitOffsets(commits, func(err error) { done <- err })
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N*8)/b.Elapsed().Seconds(), "offsets/s")
}
