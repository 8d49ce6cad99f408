package share

import (
	"fmt"
	"time"
)

// Config is a share partition's policy; group-level configs override the broker defaults.
type Config struct {
	// LockDuration is how long an acquired record stays locked to its member
	// (share.record.lock.duration.ms).
	LockDuration time.Duration
	// DeliveryCountLimit is how many times a record is delivered before a release or lock timeout
	// archives it (share.delivery.count.limit).
	DeliveryCountLimit int
	// MaxInFlight bounds the in-flight window, and so the records locked at once
	// (group.share.partition.max.record.locks).
	MaxInFlight int
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryCountLimit: 5, MaxInFlight: 2000}
}

// Validate reports an unusable config.
func (c Config) Validate() error {
	if c.LockDuration <= 0 {
		return fmt.Errorf("share: lock duration %v must be positive", c.LockDuration)
	}
	if c.DeliveryCountLimit < 1 || c.DeliveryCountLimit > 1<<14 {
		return fmt.Errorf("share: delivery count limit %d must be in [1, %d]", c.DeliveryCountLimit, 1<<14)
	}
	if c.MaxInFlight < 1 {
		return fmt.Errorf("share: max in-flight records %d must be positive", c.MaxInFlight)
	}
	return nil
}
