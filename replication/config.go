package replication

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// AckMode says what an acks=all produce waits for.
type AckMode int

const (
	// AckFsync answers once every in-sync replica has fsynced the batch (the default).
	AckFsync AckMode = iota
	// AckMemory answers once every in-sync replica has the batch in its log (page cache), as Kafka
	// does by default.
	AckMemory
)

func (m AckMode) String() string {
	if m == AckMemory {
		return "memory"
	}
	return "fsync"
}

// ParseAckMode reads "fsync" or "memory".
func ParseAckMode(s string) (AckMode, error) {
	switch s {
	case "fsync":
		return AckFsync, nil
	case "memory":
		return AckMemory, nil
	}
	return 0, fmt.Errorf("replication: ack mode %q: want fsync or memory", s)
}

// Config configures replication on one broker.
type Config struct {
	// NodeID is this broker's id; followers send it as their replica id.
	NodeID int32
	// AckMode: what acks=all waits for.
	AckMode AckMode
	// LagTimeMax is replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR.
	// Invariant: > FetchMaxWait.
	LagTimeMax time.Duration
	// FetchMaxWait is how long a follower's fetch may wait at the leader for new data.
	FetchMaxWait time.Duration
	// FetchMaxBytes bounds one fetch response; PartitionMaxBytes one partition's share of it.
	FetchMaxBytes     int32
	PartitionMaxBytes int32
	// DisconnectGrace: a follower whose fetch connections to the leader all closed, and that has
	// not fetched again within this, leaves the ISR without waiting for LagTimeMax (a killed or
	// restarted follower). Invariant: 0 < DisconnectGrace <= LagTimeMax.
	DisconnectGrace time.Duration
	// LeaderUnreachableAfter: a follower that has had no answer from its leader for FetchMaxWait
	// plus this reports the leader to the controller (which may move leadership to the followers,
	// see coordinator/unreachable_leader.go), and drops a connection whose oldest request has
	// waited that long. 0 turns both off (leadership then moves only when the leader's controller
	// session lapses). Invariant: >= 0.
	LeaderUnreachableAfter time.Duration
	// ISRCheckInterval is how often leaders look for ISR changes to propose.
	ISRCheckInterval time.Duration
	// RetryBackoff is the pause after a failed connection or request to a leader.
	RetryBackoff time.Duration
	// TLS, when not nil, is the client config followers dial leaders with (the inter-broker
	// listener's security; it offers this node's certificate for mTLS).
	TLS *tls.Config
	// Authenticate, if set, runs on every new connection to a leader before any fetch (the
	// broker's inter-broker SASL exchange); an error drops the connection and is retried.
	Authenticate func(conn net.Conn) error
	// ObserveAckWait, if set, is told for each answered acks=all produce how long after its append
	// the last in-sync follower reported it fetched, and (AckFsync) durable (ack_wait.go). It is
	// called with the replica's lock held and must not block.
	ObserveAckWait func(stage AckWaitStage, wait time.Duration)
	// UnsafeLeaderOnlyAck deliberately breaks acks=all, for the chaos suite's self-test only (see
	// unsafe_ack.go). Never set in production.
	UnsafeLeaderOnlyAck bool
}

// DefaultConfig returns production defaults for node 0.
func DefaultConfig() Config {
	return Config{
		AckMode:                AckFsync,
		LagTimeMax:             5 * time.Second,
		FetchMaxWait:           500 * time.Millisecond,
		FetchMaxBytes:          16 << 20,
		PartitionMaxBytes:      4 << 20,
		DisconnectGrace:        time.Second,
		LeaderUnreachableAfter: time.Second,
		ISRCheckInterval:       250 * time.Millisecond,
		RetryBackoff:           100 * time.Millisecond,
	}
}

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	switch {
	case c.NodeID < 0:
		return fmt.Errorf("replication: node id %d is negative", c.NodeID)
	case c.FetchMaxWait <= 0 || c.LagTimeMax <= c.FetchMaxWait:
		return fmt.Errorf("replication: replica lag time %v must exceed the fetch max wait %v (> 0)", c.LagTimeMax, c.FetchMaxWait)
	case c.DisconnectGrace <= 0 || c.DisconnectGrace > c.LagTimeMax:
		return fmt.Errorf("replication: disconnect grace %v must be positive and at most the replica lag time %v", c.DisconnectGrace, c.LagTimeMax)
	case c.LeaderUnreachableAfter < 0:
		return fmt.Errorf("replication: leader unreachable time %v is negative", c.LeaderUnreachableAfter)
	case c.FetchMaxBytes < 1024 || c.PartitionMaxBytes < 1024:
		return fmt.Errorf("replication: fetch byte bounds %d/%d below 1024", c.FetchMaxBytes, c.PartitionMaxBytes)
	case c.ISRCheckInterval <= 0 || c.RetryBackoff <= 0:
		return fmt.Errorf("replication: ISR check interval %v and retry backoff %v must be positive", c.ISRCheckInterval, c.RetryBackoff)
	}
	return nil
}
