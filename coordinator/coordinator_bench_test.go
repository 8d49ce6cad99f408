package coordinator

import (
	"context"
	"fmt"
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
