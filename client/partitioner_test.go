package client_test

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

// TestKeyPartitionMatchesFranzGo compares the murmur2 partitioner with franz-go's default
// (StickyKeyPartitioner with Kafka's murmur2 hasher) on 10,000 random keys, for several partition
// counts, including empty (non-nil) keys, which are hashed, not sticky.
func TestKeyPartitionMatchesFranzGo(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	franz := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	ours := client.KeyHashPartitioner()
	for i := 0; i < 10_000; i++ {
		key := make([]byte, random.IntN(48))
		for j := range key {
			key[j] = byte(random.UintN(256))
		}
		partitions := 1 + random.IntN(128)
		want := franz.Partition(&kgo.Record{Key: key}, partitions)
		if got := client.KeyPartition(key, partitions); got != want {
			t.Fatalf("key %x over %d partitions: ours %d, franz-go %d", key, partitions, got, want)
		}
		if got := ours.Partition(&client.Record{Key: key}, partitions); got != want {
			t.Fatalf("KeyHashPartitioner: key %x over %d partitions: %d, franz-go %d", key, partitions, got, want)
		}
	}
	if got := ours.Partition(&client.Record{}, 8); got != client.AnyPartition {
		t.Fatalf("nil key partitioned to %d, want AnyPartition (sticky)", got)
	}
}
