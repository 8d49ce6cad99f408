package broker

// Offline partitions: partitions this node holds a replica of whose log could not be opened (EMFILE,
// ENOSPC, EIO at mkdir, file creation or preallocation, or a partition directory that cannot be
// prepared). They are never listed as served: Produce, Fetch and ListOffsets answer
// KAFKA_STORAGE_ERROR for them, Metadata lists them with KAFKA_STORAGE_ERROR, no leader and this node
// among the offline replicas, and CreateTopics answers KAFKA_STORAGE_ERROR for a topic with such a
// partition here. A retry goroutine re-applies the latest metadata with exponential backoff per
// partition (offlineRetryFirst doubling up to offlineRetryMax); whichever apply opens the log brings
// the partition online. A start with offline partitions serves the others.
//
// The registry keeps offline partitions out of its snapshot (a nil slot, as for partitions of other
// nodes) and records them here, keyed by topic name and index and tagged with the topic id, so that a
// topic deleted and re-created under the same name starts afresh.
//
// Lock order: offlinePartitions.applyMu (held across a whole registry apply), then
// offlinePartitions.mu.

import (
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

const (
	offlineRetryFirst = 500 * time.Millisecond
	offlineRetryMax   = 30 * time.Second
)

type partitionKey struct {
	topic string
	index int32
}

// offlinePartition is one partition whose log failed to open.
type offlinePartition struct {
	topicID     [16]byte
	err         error
	since       time.Time
	failures    int
	nextAttempt time.Time
}

// offlinePartitions tracks offline partitions and owns the goroutine that retries them.
type offlinePartitions struct {
	logger *slog.Logger

	// applyMu serializes registry applies from the metadata subscription and from the retry
	// goroutine; latest is the metadata last applied, which a retry applies again.
	applyMu sync.Mutex
	latest  *coordinator.Metadata

	mu struct {
		sync.Mutex
		byPartition map[partitionKey]*offlinePartition
		running     bool // the retry goroutine was started
		closed      bool
	}
	wake chan struct{} // capacity 1: a new or changed entry
	stop chan struct{}
	done chan struct{}
}

func (o *offlinePartitions) init(logger *slog.Logger) {
	o.logger = logger
	o.mu.byPartition = map[partitionKey]*offlinePartition{}
	o.wake = make(chan struct{}, 1)
	o.stop = make(chan struct{})
	o.done = make(chan struct{})
}

// applyMetadata is the registry's metadata subscriber: apply, serialized with the retries, then
// forget offline partitions whose topic is gone.
func (r *registry) applyMetadata(old, latest *coordinator.Metadata) {
	r.offline.applyMu.Lock()
	defer r.offline.applyMu.Unlock()
	r.offline.latest = latest
	r.apply(old, latest)
	r.offline.forgetDeleted(latest, r.partitionDir, r.discard)
}

// retryOffline applies the latest metadata again, which reopens every offline partition that is due.
func (r *registry) retryOffline() {
	r.offline.applyMu.Lock()
	defer r.offline.applyMu.Unlock()
	if r.offline.latest != nil {
		r.apply(r.offline.latest, r.offline.latest)
	}
}

// openLog prepares a partition's directory and opens its log. On failure the partition is recorded
// offline and a retry scheduled; while its backoff runs, openLog fails at once with the recorded
// error instead of trying again. A partition that was offline stays recorded so until the caller
// has published it (offlinePartitions.online): Metadata must not call it served while requests
// still find no partition.
func (r *registry) openLog(topic string, index int32, topicID [16]byte, cfg segment.Config) (*segment.Log, error) {
	key := partitionKey{topic, index}
	now := time.Now()
	if err := r.offline.waiting(key, topicID, now); err != nil {
		return nil, err
	}
	dir := r.partitionDir(topic, index)
	err := preparePartitionDir(dir, topicID, now, r.logger)
	if err == nil {
		var log *segment.Log
		if log, err = segment.Open(dir, cfg); err == nil {
			return log, nil
		}
	}
	r.offline.failed(key, topicID, err, now, r.runOfflineRetries)
	return nil, err
}

// runOfflineRetries is the retry goroutine; offlinePartitions.close stops it.
func (r *registry) runOfflineRetries() {
	o := &r.offline
	defer close(o.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, ok := o.nextAttempt()
		if ok {
			timer.Reset(max(time.Until(next), 0))
		} else {
			timer.Stop()
		}
		select {
		case <-o.stop:
			return
		case <-o.wake:
			continue
		case <-timer.C:
		}
		r.retryOffline()
	}
}

// waiting returns the recorded error while key's backoff runs, nil when it may be tried.
func (o *offlinePartitions) waiting(key partitionKey, topicID [16]byte, now time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	entry, ok := o.mu.byPartition[key]
	if !ok || entry.topicID != topicID || !now.Before(entry.nextAttempt) {
		return nil
	}
	return entry.err
}

// failed records a failed open and makes sure the retry goroutine runs.
func (o *offlinePartitions) failed(key partitionKey, topicID [16]byte, err error, now time.Time, run func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.closed {
		return
	}
	entry, ok := o.mu.byPartition[key]
	if !ok || entry.topicID != topicID {
		entry = &offlinePartition{topicID: topicID, since: now}
		o.mu.byPartition[key] = entry
	}
	entry.err = err
	entry.failures++
	delay := min(offlineRetryFirst<<min(entry.failures-1, 16), offlineRetryMax)
	entry.nextAttempt = now.Add(delay)
	// The first failure and then every power of two: a disk that stays full does not flood the log.
	if entry.failures == 1 {
		o.logger.Error("partition offline: its log could not be opened; answering KAFKA_STORAGE_ERROR and retrying",
			"topic", key.topic, "partition", key.index, "retry_in", delay, "err", err)
	} else if bits.OnesCount(uint(entry.failures)) == 1 {
		o.logger.Warn("partition still offline", "topic", key.topic, "partition", key.index,
			"attempts", entry.failures, "offline_for", now.Sub(entry.since).Round(time.Millisecond), "retry_in", delay, "err", err)
	}
	if !o.mu.running {
		o.mu.running = true
		go run()
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// online forgets key once its log is open.
func (o *offlinePartitions) online(key partitionKey, topicID [16]byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	entry, ok := o.mu.byPartition[key]
	if !ok {
		return
	}
	delete(o.mu.byPartition, key)
	if entry.topicID == topicID {
		o.logger.Info("partition back online", "topic", key.topic, "partition", key.index,
			"attempts", entry.failures, "offline_for", time.Since(entry.since).Round(time.Millisecond))
	}
}

// forgetDeleted drops the partitions of topics that no longer exist (or exist under another id),
// and removes their directories if they hold that deleted topic's id: deleting a topic deletes its
// data, whether or not its log ever opened.
func (o *offlinePartitions) forgetDeleted(latest *coordinator.Metadata, dirOf func(string, int32) string, remove func(dir string) error) {
	o.mu.Lock()
	var gone []partitionKey
	var ids [][16]byte
	for key, entry := range o.mu.byPartition {
		if t, ok := latest.Topics[key.topic]; !ok || t.ID != entry.topicID || int(key.index) >= len(t.Partitions) {
			gone = append(gone, key)
			ids = append(ids, entry.topicID)
			delete(o.mu.byPartition, key)
		}
	}
	o.mu.Unlock()
	for i, key := range gone {
		dir := dirOf(key.topic, key.index)
		if stored, err := readTopicID(dir); err == nil && stored == ids[i] {
			if err := remove(dir); err != nil {
				o.logger.Error("delete offline partition dir", "dir", dir, "err", err)
			}
		}
	}
}

// nextAttempt is the earliest time an offline partition is due.
func (o *offlinePartitions) nextAttempt() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var next time.Time
	for _, entry := range o.mu.byPartition {
		if next.IsZero() || entry.nextAttempt.Before(next) {
			next = entry.nextAttempt
		}
	}
	return next, !next.IsZero()
}

// lookup returns why a partition of topic id is offline, or nil.
func (o *offlinePartitions) lookup(topic string, index int32, topicID [16]byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if entry, ok := o.mu.byPartition[partitionKey{topic, index}]; ok && entry.topicID == topicID {
		return entry.err
	}
	return nil
}

// topicError describes the offline partitions of a topic, or returns nil when there are none.
func (o *offlinePartitions) topicError(topic string, topicID [16]byte, nodeID int32) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var indexes []int32
	var first error
	for key, entry := range o.mu.byPartition {
		if key.topic == topic && entry.topicID == topicID {
			indexes = append(indexes, key.index)
			if first == nil {
				first = entry.err
			}
		}
	}
	if len(indexes) == 0 {
		return nil
	}
	slices.Sort(indexes)
	listed := make([]string, len(indexes))
	for i, index := range indexes {
		listed[i] = fmt.Sprint(index)
	}
	return fmt.Errorf("broker: topic %s created, but node %d could not open the log of partition(s) %s and keeps retrying: %w: %w",
		topic, nodeID, strings.Join(listed, ","), protocol.KafkaStorageError, first)
}

// markOffline rewrites a Metadata topic's partitions that are offline on this node: error
// KAFKA_STORAGE_ERROR, no leader, this node among the offline replicas and out of the ISR.
func (o *offlinePartitions) markOffline(rt *kmsg.MetadataResponseTopic, nodeID int32) {
	if rt.Topic == nil {
		return
	}
	for i := range rt.Partitions {
		rp := &rt.Partitions[i]
		if o.lookup(*rt.Topic, rp.Partition, rt.TopicID) == nil {
			continue
		}
		rp.ErrorCode = protocol.KafkaStorageError.Code
		rp.Leader = -1
		rp.ISR = slices.DeleteFunc(rp.ISR, func(id int32) bool { return id == nodeID })
		if !slices.Contains(rp.OfflineReplicas, nodeID) {
			rp.OfflineReplicas = append(rp.OfflineReplicas, nodeID)
		}
	}
}

// close stops the retry goroutine and waits for it; later failures start nothing.
func (o *offlinePartitions) close() {
	o.mu.Lock()
	running := o.mu.running
	if !o.mu.closed {
		o.mu.closed = true
		close(o.stop)
	}
	o.mu.Unlock()
	if running {
		<-o.done
	}
}
