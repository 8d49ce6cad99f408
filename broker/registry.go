package broker

import (
	"github.com/VictoriaMetrics/metrics"

	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/replication"
	"github.com/sluice-mq/sluice/segment"
	"github.com/sluice-mq/sluice/trash"
)

// registry maps topics to the partitions this broker serves. It follows the coordinator's metadata:
// apply runs on the subscription goroutine only, and publishes copy-on-write snapshots.
type registry struct {
	nodeID          int32
	dir             string
	logDefaults     segment.Config
	maxMessageBytes int32
	logger          *slog.Logger
	// offline holds the partitions whose log failed to open (partition_offline.go).
	offline offlinePartitions
	// replicas runs follower fetches and ISR checks; replication its settings.
	replicas    *replication.Manager
	replication replication.Config
	// trash removes deleted partitions' directories in the background. Start sets it before the
	// first metadata is applied; closeAll, which stops it, runs only after.
	trash *trash.Bin
	// incarnation identifies this run of the broker (coordinator.Broker.Incarnation); set before
	// the first metadata is applied. Empty: no registration gate (tests of the registry alone).
	incarnation string
	// leaderElections counts partitions this broker took over at a new leader epoch (set by
	// NewBroker after construction).
	leaderElections *metrics.Counter

	topics atomic.Pointer[map[string]*topicState]
	// topicIDs resolves the topic ids of Produce and Fetch v13+ (topic_ids.go).
	topicIDs topicIDs

	applied struct {
		sync.Mutex
		version uint64
		changed chan struct{} // closed and replaced on every apply
		closed  bool
	}
}

func newRegistry(nodeID int32, dir string, logDefaults segment.Config, maxMessageBytes int32,
	replicas *replication.Manager, replicationConfig replication.Config, logger *slog.Logger) *registry {
	r := &registry{nodeID: nodeID, dir: dir, logDefaults: logDefaults, maxMessageBytes: maxMessageBytes,
		replicas: replicas, replication: replicationConfig, logger: logger}
	empty := map[string]*topicState{}
	r.topics.Store(&empty)
	r.applied.changed = make(chan struct{})
	r.offline.init(logger)
	return r
}

func (r *registry) snapshot() map[string]*topicState { return *r.topics.Load() }

// partition finds a local partition, or the Kafka error to answer.
func (r *registry) partition(topic string, index int32) (*partition, error) {
	t, ok := r.snapshot()[topic]
	if !ok || index < 0 || int(index) >= len(t.partitions) {
		return nil, fmt.Errorf("broker: %s-%d: %w", topic, index, protocol.UnknownTopicOrPartition)
	}
	p := t.partitions[index]
	if p == nil {
		if err := r.offline.lookup(topic, index, t.meta.ID); err != nil {
			return nil, fmt.Errorf("broker: %s-%d is offline on node %d: %w: %w", topic, index, r.nodeID, protocol.KafkaStorageError, err)
		}
		return nil, fmt.Errorf("broker: %s-%d is not on node %d: %w", topic, index, r.nodeID, protocol.NotLeaderOrFollower)
	}
	if p.state.Load().leader != r.nodeID {
		return nil, fmt.Errorf("broker: node %d does not lead %s-%d: %w", r.nodeID, topic, index, protocol.NotLeaderOrFollower)
	}
	return p, nil
}

func (r *registry) partitionDir(topic string, index int32) string {
	return filepath.Join(r.dir, fmt.Sprintf("%s-%d", topic, index))
}

// apply brings the local logs in line with the new metadata: deleted topics lose their logs, new
// partitions get theirs, config and leadership changes reach the existing ones.
func (r *registry) apply(old, latest *coordinator.Metadata) {
	current := r.snapshot()
	next := make(map[string]*topicState, len(latest.Topics))
	var deleted []*partition
	for name, t := range current {
		meta, ok := latest.Topics[name]
		if ok && meta.ID == t.meta.ID {
			next[name] = t
			continue
		}
		for _, p := range t.partitions {
			if p != nil {
				deleted = append(deleted, p)
			}
		}
		r.logger.Info("topic deleted", "topic", name)
	}
	if len(deleted) > 0 {
		// Unpublish first, so that no request reaches a log being deleted, then delete, so that a
		// topic re-created under the same name opens a fresh directory. Parked fetches woken after
		// the unpublish re-check and find the topic gone.
		kept := maps.Clone(next)
		r.topics.Store(&kept)
		for _, p := range deleted {
			r.replicas.Forget(p.replica)
			p.replica.Stop()
			p.appended()
			if err := p.log.Delete(r.discard); err != nil {
				r.logger.Error("delete partition log", "topic", p.topic, "partition", p.index, "err", err)
			}
		}
	}
	self, found := latest.Brokers[r.nodeID]
	registered := r.incarnation == "" || (found && self.Incarnation == r.incarnation)
	type openedPartition struct {
		key     partitionKey
		topicID [16]byte
	}
	var opened []openedPartition
	for name, meta := range latest.Topics {
		t, ok := next[name]
		if !ok {
			t = &topicState{}
			r.logger.Info("topic created", "topic", name, "partitions", len(meta.Partitions))
		}
		updated := &topicState{meta: meta, partitions: slices.Clone(t.partitions)}
		logCfg, err := topicLogConfig(r.logDefaults, meta.Configs)
		if err != nil {
			r.logger.Error("topic config unusable, using broker defaults", "topic", name, "err", err)
			logCfg = r.logDefaults
		}
		for len(updated.partitions) < len(meta.Partitions) {
			updated.partitions = append(updated.partitions, nil)
		}
		for i, pm := range meta.Partitions {
			state := &partitionState{
				leader:          pm.Leader,
				leaderEpoch:     pm.LeaderEpoch,
				maxMessageBytes: topicMaxMessageBytes(r.maxMessageBytes, meta.Configs),
				minInsync:       topicMinInsync(meta.Configs),
				isrSize:         len(pm.ISR),
				compaction:      topicCompaction(meta.Configs),
			}
			p := updated.partitions[i]
			if p == nil {
				if !slices.Contains(pm.Replicas, r.nodeID) {
					continue
				}
				var err error
				if p, err = r.openPartition(name, int32(i), meta.ID, logCfg); err != nil {
					continue // offline: openLog logged it and retries (partition_offline.go)
				}
				opened = append(opened, openedPartition{partitionKey{name, int32(i)}, meta.ID})
			} else if err := p.log.SetConfig(logCfg); err != nil {
				r.logger.Error("apply topic config", "topic", name, "partition", i, "err", err)
			}
			p.state.Store(state)
			r.applyRole(p, pm, registered)
			updated.partitions[i] = p
		}
		next[name] = updated
	}
	r.topics.Store(&next)
	for _, o := range opened {
		r.offline.online(o.key, o.topicID) // published: no longer offline, if it was
	}
	r.applied.Lock()
	r.applied.version = latest.Version
	close(r.applied.changed)
	r.applied.changed = make(chan struct{})
	r.applied.Unlock()
}

// waitVersion blocks until metadata at least as new as version has been applied locally.
func (r *registry) waitVersion(ctx context.Context, version uint64) error {
	for {
		r.applied.Lock()
		done, changed := r.applied.version >= version, r.applied.changed
		r.applied.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("broker: wait for metadata version %d: %w", version, ctx.Err())
		}
	}
}

// forEach calls fn for every local partition.
func (r *registry) forEach(fn func(*partition)) {
	for _, t := range r.snapshot() {
		for _, p := range t.partitions {
			if p != nil {
				fn(p)
			}
		}
	}
}

// discard removes a deleted partition's directory: its name is free on return, its files are
// removed in the background.
func (r *registry) discard(dir string) error { return r.trash.Discard(dir, time.Now()) }

// closeAll closes every log cleanly and stops the background removal.
func (r *registry) closeAll() {
	r.offline.close()
	defer r.trash.Close()
	r.forEach(func(p *partition) {
		r.replicas.Forget(p.replica)
		p.replica.Stop()
		p.appended()
		if err := p.log.Close(); err != nil {
			r.logger.Error("close partition log", "topic", p.topic, "partition", p.index, "err", err)
		}
	})
	empty := map[string]*topicState{}
	r.topics.Store(&empty)
}
