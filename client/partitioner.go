package client

import "encoding/binary"

// AnyPartition, returned by a Partitioner, lets the producer choose the partition: the sticky
// partition of the topic, which changes each time a batch for it is closed. This spreads keyless
// records over all partitions while keeping batches large (Kafka's KIP-480).
const AnyPartition = -1

// Partitioner chooses the partition of each record. It must be safe for concurrent use and return
// a partition in [0, partitions) or AnyPartition.
type Partitioner interface {
	Partition(r *Record, partitions int) int
}

// PartitionerFunc adapts a function to Partitioner.
type PartitionerFunc func(r *Record, partitions int) int

// Partition implements Partitioner.
func (f PartitionerFunc) Partition(r *Record, partitions int) int { return f(r, partitions) }

// KeyHashPartitioner is the default partitioner: a record with a non-nil key goes to
// KeyPartition(key, partitions), the partition the Java client and franz-go's default partitioner
// choose; a record with a nil key goes to the sticky partition (AnyPartition).
func KeyHashPartitioner() Partitioner {
	return PartitionerFunc(func(r *Record, partitions int) int {
		if r.Key == nil {
			return AnyPartition
		}
		return KeyPartition(r.Key, partitions)
	})
}

// ManualPartitioner sends each record to the partition already set in Record.Partition.
func ManualPartitioner() Partitioner {
	return PartitionerFunc(func(r *Record, _ int) int { return int(r.Partition) })
}

// KeyPartition maps key to a partition as Kafka's default partitioner does: the murmur2 hash with
// the sign bit cleared, modulo the partition count. partitions must be positive.
func KeyPartition(key []byte, partitions int) int {
	return int(murmur2(key)&0x7fffffff) % partitions
}

// murmur2 is the 32-bit MurmurHash2 with Kafka's seed, reading the key as little-endian 32-bit
// words, as org.apache.kafka.common.utils.Utils.murmur2 does.
func murmur2(data []byte) uint32 {
	const (
		seed       uint32 = 0x9747b28c
		multiplier uint32 = 0x5bd1e995
		shift             = 24
	)
	hash := seed ^ uint32(len(data))
	words := len(data) / 4
	for i := 0; i < words; i++ {
		k := binary.LittleEndian.Uint32(data[4*i:])
		k *= multiplier
		k ^= k >> shift
		k *= multiplier
		hash *= multiplier
		hash ^= k
	}
	tail := data[4*words:]
	switch len(tail) {
	case 3:
		hash ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		hash ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		hash ^= uint32(tail[0])
		hash *= multiplier
	}
	hash ^= hash >> 13
	hash *= multiplier
	hash ^= hash >> 15
	return hash
}
