package broker

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/compaction"
	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/replication"
	"github.com/sluice-mq/sluice/segment"
)

// partition is one partition this broker holds a replica of. It lives as long as the log; what
// metadata changes (leadership, configs) is swapped atomically in state.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *segment.Log
	// replica is the partition's replication state (role, watermarks, epoch history); its Log is log.
	replica *replication.Replica
	state   atomic.Pointer[partitionState]
	// producers is the idempotent producer state (producer_state.go).
	producers producerStates

	// waiters are fetches parked until this partition's log grows, keyed by their owner.
	waiters struct {
		sync.Mutex
		byOwner map[any]func()
	}
}

// partitionState is the metadata-derived part of a partition, replaced as a whole.
type partitionState struct {
	leader          int32
	leaderEpoch     int32
	maxMessageBytes int32
	minInsync       int
	isrSize         int
	// compaction is the topic's compaction policy, nil unless cleanup.policy lists compact
	// (log_cleaner.go): records need keys, and the cleaner compacts the log.
	compaction *compaction.Policy
}

// newPartition wraps an open log: it loads the log's epoch history and makes its replica, with no
// role yet.
func newPartition(topic string, index int32, topicID [16]byte, log *segment.Log, cfg replication.Config) (*partition, error) {
	epochs, err := replication.OpenEpochHistory(log.Dir(), log.LogEndOffset())
	if err != nil {
		return nil, fmt.Errorf("broker: %s-%d: %w", topic, index, err)
	}
	p := &partition{topic: topic, index: index, topicID: topicID, log: log}
	p.replica = replication.NewReplica(topic, index, log, epochs, cfg)
	return p, nil
}

// awaitAppend registers wake to be called once, on the next append, unless owner cancels first.
func (p *partition) awaitAppend(owner any, wake func()) {
	p.waiters.Lock()
	if p.waiters.byOwner == nil {
		p.waiters.byOwner = map[any]func(){}
	}
	p.waiters.byOwner[owner] = wake
	p.waiters.Unlock()
}

// cancelAwait drops owner's registration, if it has not fired.
func (p *partition) cancelAwait(owner any) {
	p.waiters.Lock()
	delete(p.waiters.byOwner, owner)
	p.waiters.Unlock()
}

// appended wakes every parked fetch.
func (p *partition) appended() {
	p.waiters.Lock()
	if len(p.waiters.byOwner) == 0 {
		p.waiters.Unlock()
		return
	}
	waiters := p.waiters.byOwner
	p.waiters.byOwner = nil
	p.waiters.Unlock()
	for _, wake := range waiters {
		wake()
	}
}

// topicState is a topic as this broker serves it: metadata plus the local partitions.
type topicState struct {
	meta       *coordinator.Topic
	partitions []*partition // indexed by partition number; nil where this node holds no replica
}

// topicLogConfig turns a topic's config overrides into log settings over the broker defaults.
func topicLogConfig(defaults segment.Config, configs map[string]string) (segment.Config, error) {
	cfg := defaults
	for key, value := range configs {
		number, err := strconv.ParseInt(value, 10, 64)
		switch key {
		case coordinator.ConfigRetentionMs:
			if err == nil {
				cfg.RetentionTime = time.Duration(number) * time.Millisecond
				if number < 0 {
					cfg.RetentionTime = -1
				}
			}
		case coordinator.ConfigRetentionBytes:
			if err == nil {
				cfg.RetentionBytes = number
			}
		case coordinator.ConfigSegmentBytes:
			if err == nil {
				cfg.SegmentBytes = max(number, 1024)
			}
		case coordinator.ConfigSegmentMs:
			if err == nil {
				cfg.SegmentAge = time.Duration(number) * time.Millisecond
			}
		case coordinator.ConfigFlushMessages:
			if err == nil && number <= 1 {
				cfg.Flush = segment.FlushOnAppend
			}
		case coordinator.ConfigFlushMs:
			if err == nil && number >= 0 && number < 1<<40 && cfg.Flush != segment.FlushOnAppend {
				cfg.Flush = segment.FlushOnInterval
				cfg.FlushInterval = max(time.Duration(number)*time.Millisecond, time.Millisecond)
			}
		default:
			continue
		}
		if err != nil {
			return cfg, fmt.Errorf("broker: topic config %s=%q: %w", key, value, err)
		}
	}
	compactedLogConfig(&cfg, configs)
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// topicMaxMessageBytes reads max.message.bytes over the broker default.
func topicMaxMessageBytes(defaultBytes int32, configs map[string]string) int32 {
	if value, ok := configs[coordinator.ConfigMaxMessageBytes]; ok {
		if n, err := strconv.ParseInt(value, 10, 32); err == nil && n >= 0 {
			return int32(n)
		}
	}
	return defaultBytes
}

// topicMinInsync reads min.insync.replicas (default 1).
func topicMinInsync(configs map[string]string) int {
	if value, ok := configs[coordinator.ConfigMinInsyncReplicas]; ok {
		if n, err := strconv.Atoi(value); err == nil && n >= 1 {
			return n
		}
	}
	return 1
}
