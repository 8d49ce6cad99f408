package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
)

// A Driver is the Kafka client a run goes through: sluice's client/ ("client") or franz-go
// ("franz"). Both are driven the same way, so their figures compare.
type Driver interface {
	// CreateTopic creates a topic with the given partitions (replication factor: the broker's default).
	CreateTopic(ctx context.Context, name string, partitions int32) error
	DeleteTopic(ctx context.Context, name string) error
	NewProducer(ctx context.Context, w Workload) (Producer, error)
	// NewConsumer reads the partitions named, from their start, calling onRecord for each record
	// (from one goroutine at a time).
	NewConsumer(ctx context.Context, topic string, partitions []int32, onRecord func(value []byte)) (Consumer, error)
	Close()
}

// Producer sends records. Send may block while the producer's pending bytes are at their bound;
// done is called once per accepted record, from a client goroutine, and must not block.
type Producer interface {
	Send(ctx context.Context, topic string, key, value []byte, done func(error)) error
	// Close flushes and waits for every done until ctx ends.
	Close(ctx context.Context) error
}

// Consumer reads until Close.
type Consumer interface {
	Close() error
}

// Drivers names the drivers NewDriver knows.
var Drivers = []string{"client", "franz"}

// NewDriver returns the named driver talking to brokers.
func NewDriver(name string, brokers []string) (Driver, error) {
	switch name {
	case "client", "sluice":
		return newClientDriver(brokers)
	case "franz", "franz-go":
		return newFranzDriver(brokers)
	}
	return nil, fmt.Errorf("bench: unknown driver %q (want client or franz)", name)
}

// MinMessageSize is the smallest message: the send-time stamp and room to spare.
const MinMessageSize = 16

// The first 8 bytes of every value are its send time, Unix nanoseconds, big-endian: the consumer
// subtracts it from its own clock for the end-to-end latency. Across hosts this needs synchronised
// clocks (chrony/NTP keeps them within tens of microseconds on one network).
func stamp(value []byte, sent time.Time) { binary.BigEndian.PutUint64(value, uint64(sent.UnixNano())) }

func stampOf(value []byte) (time.Time, bool) {
	if len(value) < 8 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(value))), true
}
