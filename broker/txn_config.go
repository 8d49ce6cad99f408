package broker

import (
	"fmt"
	"time"
)

// TransactionConfig configures the transaction coordinator.
type TransactionConfig struct {
	// MaxTimeout is Kafka's transaction.max.timeout.ms: InitProducerId with a longer
	// transaction.timeout.ms gets INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// CheckInterval is how often the coordinator looks for transactions past their timeout (and
	// decided ones left incomplete) and checkpoints partitions' transaction state.
	CheckInterval time.Duration
}

// DefaultTransactionConfig is Kafka's maximum (15 minutes) and a 1 s check.
func DefaultTransactionConfig() TransactionConfig {
	return TransactionConfig{MaxTimeout: 15 * time.Minute, CheckInterval: time.Second}
}

// Validate reports unusable settings.
func (c TransactionConfig) Validate() error {
	if c.MaxTimeout < time.Millisecond || c.MaxTimeout > (1<<31-1)*time.Millisecond {
		return fmt.Errorf("transaction max timeout %v outside 1ms..%v", c.MaxTimeout, (1<<31-1)*time.Millisecond)
	}
	if c.CheckInterval <= 0 {
		return fmt.Errorf("transaction check interval %v must be positive", c.CheckInterval)
	}
	return nil
}
