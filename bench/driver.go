package bench

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"sync"
	"time"
)

// A Driver is the Kafka client a run goes through: sluice's client/ ("client") or franz-go
// ("franz"). Both are driven the same way, so their figures compare.
type Driver interface {
	// CreateTopic creates a topic with the given partitions, replication factor (-1: the broker's
	// default) and config overrides.
	CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string) error
	DeleteTopic(ctx context.Context, name string) error
	// NewProducer returns a producer that calls done once per accepted record, from a client
	// goroutine, with the timestamp Send gave the record; done must not block.
	NewProducer(ctx context.Context, w Workload, done func(sent time.Time, err error)) (Producer, error)
	// NewConsumer joins group as a member subscribing to topic (cooperative-sticky balancing,
	// commits every few seconds and on revoke) and calls onRecord for each record it is given (from
	// one goroutine at a time), with the time the poll that brought it returned (one clock read per
	// poll, not per record). A partition without a committed offset starts at its log start.
	NewConsumer(ctx context.Context, topic, group string, onRecord func(value []byte, received time.Time)) (Consumer, error)
	Close()
}

// Producer sends records, one Send at a time. Send may block while the producer's pending bytes
// are at their bound. sent becomes the record's timestamp (the caller has read the clock already;
// the client need not) and comes back in the producer's done: one done for all records spares a
// closure per record.
type Producer interface {
	Send(ctx context.Context, topic string, key, value []byte, sent time.Time) error
	// Close flushes and waits for every done until ctx ends.
	Close(ctx context.Context) error
}

// Consumer reads until Close.
type Consumer interface {
	// Assigned is closed once the group has given this member partitions.
	Assigned() <-chan struct{}
	// Close leaves the group and reports what stopped the reading early, if anything.
	Close() error
}

// groupHeartbeatInterval is both drivers' heartbeat: members learn of a rebalance at their next
// heartbeat, so a short one lets a group of many members settle within a warm-up.
const groupHeartbeatInterval = time.Second

// assignedSignal closes its channel at the first assignment that holds partitions.
type assignedSignal struct {
	once sync.Once
	ch   chan struct{}
}

func newAssignedSignal() *assignedSignal { return &assignedSignal{ch: make(chan struct{})} }

func (s *assignedSignal) assigned(partitions int) {
	if partitions > 0 {
		s.once.Do(func() { close(s.ch) })
	}
}

// Drivers names the drivers NewDriver knows.
var Drivers = []string{"client", "franz"}

// NewDriver returns the named driver talking to brokers, through TLS when tlsConfig is not nil.
func NewDriver(name string, brokers []string, tlsConfig *tls.Config) (Driver, error) {
	switch name {
	case "client", "sluice":
		return newClientDriver(brokers, tlsConfig)
	case "franz", "franz-go":
		return newFranzDriver(brokers, tlsConfig)
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
