package broker

// Fetch v4-v18. For each partition the broker reads from the batch holding the fetch offset up to the
// high watermark, within the partition's and the request's byte budgets, always at least one whole
// batch for the first partition with data (KIP-74). Record bytes go out as file ranges (sendfile), so
// the response is framed here by hand around them. A fetch with less than min_bytes available waits up
// to max_wait_ms, woken by appends to any of its partitions. Fetch sessions are declined
// (fetch_session.go): every response carries session id 0, so clients keep sending full fetches. Per partition: unknown UNKNOWN_TOPIC_OR_PARTITION, offset outside
// [log start, log end] OFFSET_OUT_OF_RANGE, a stale current_leader_epoch FENCED_LEADER_EPOCH, a newer
// one UNKNOWN_LEADER_EPOCH, an offset in data the log found damaged CORRUPT_MESSAGE (the batches before
// the damage are served; the log itself logs the damage), any other read failure KAFKA_STORAGE_ERROR.
// From v13 topics are named by id (KIP-516), answered by id; an id the broker does not know gets
// UNKNOWN_TOPIC_ID for each of its partitions. From v15 the replica id travels in ReplicaState. The
// tagged fields of v12+ (diverging epoch, current leader, snapshot id, node endpoints) are never
// set, and the v17/v18 request tags (replica directory id, follower high watermark) are ignored.

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/netpoll"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

type fetchPartitionResult struct {
	partition      int32
	fetchOffset    int64 // the request's, for sluice_topic_records_out_total
	errorCode      int16
	highWatermark  int64
	lastStable     int64 // the last stable offset (fetch_txn.go)
	logStartOffset int64
	slice          segment.Slice
	aborted        []segment.AbortedTxn // read_committed only
}

type fetchTopicResult struct {
	topic      string
	topicID    [16]byte // v13+: what the response names the topic by
	partitions []fetchPartitionResult
}

// fetchState is one fetch request between its arrival and its response; it may be evaluated several
// times while it waits for data.
type fetchState struct {
	broker *Broker
	r      *request
	req    *kmsg.FetchRequest

	mu struct {
		sync.Mutex
		done    bool
		timer   *time.Timer
		waiting []*partition
	}
}

func (b *Broker) handleFetch(r *request, req *kmsg.FetchRequest) {
	if code := fetchSessionRefusal(req); code != 0 {
		b.respondFetch(r, req, code, nil)
		return
	}
	b.resolveFetchRequest(req)
	r.followerFetch = req.ReplicaID >= 0
	if req.ReplicaID >= 0 && r.session.follower.CompareAndSwap(0, req.ReplicaID+1) {
		b.followers.opened(req.ReplicaID)
	}
	f := &fetchState{broker: b, r: r, req: req}
	if req.MaxWaitMillis <= 0 || req.MinBytes <= 0 || b.closing.Load() {
		r.readBegun = time.Now() // request_timing.go
		results, _, _ := b.evaluateFetch(req, r.received)
		b.respondFetch(r, req, 0, results)
		return
	}
	f.mu.Lock()
	f.mu.timer = time.AfterFunc(time.Duration(req.MaxWaitMillis)*time.Millisecond, f.expire)
	f.mu.Unlock()
	if req.ReplicaID >= 0 {
		r.session.parkedReplicaFetch.Store(f)
	}

	f.attempt()
}

// resolveFetchRequest brings the later versions' fields to where the rest of the code reads them:
// topic names from topic ids (v13+; an unknown id leaves the name empty, which no topic has), and
// the replica id from ReplicaState (v15+).
func (b *Broker) resolveFetchRequest(req *kmsg.FetchRequest) {
	if req.Version >= 13 {
		for i := range req.Topics {
			req.Topics[i].Topic, _ = b.registry.topicName(req.Topics[i].TopicID)
		}
	}
	if req.Version >= 15 {
		req.ReplicaID = req.ReplicaState.ID
	}
}

// attempt parks on every partition of the request, then evaluates: registering first means an append
// racing with the evaluation still wakes the fetch.
func (f *fetchState) attempt() {
	f.mu.Lock()
	if f.mu.done {
		f.mu.Unlock()
		return
	}
	f.parkLocked()
	f.mu.Unlock()
	readBegin := time.Now()
	results, total, failed := f.broker.evaluateFetch(f.req, f.r.received)
	if total >= int64(f.req.MinBytes) || failed || f.broker.closing.Load() {
		f.finish(results, readBegin)
	}
}

func (f *fetchState) parkLocked() {
	f.mu.waiting = f.mu.waiting[:0]
	for _, rt := range f.req.Topics {
		for _, rp := range rt.Partitions {
			if p, err := f.broker.registry.partition(rt.Topic, rp.Partition); err == nil {
				p.awaitAppend(f, f.wake)
				f.mu.waiting = append(f.mu.waiting, p)
			}
		}
	}
}

// wake runs on the appending goroutine; it must not block it.
func (f *fetchState) wake() { go f.attempt() }

func (f *fetchState) expire() {
	f.mu.Lock()
	done := f.mu.done
	f.mu.Unlock()
	if done {
		return
	}
	readBegin := time.Now()
	results, _, _ := f.broker.evaluateFetch(f.req, f.r.received)
	f.finish(results, readBegin)
}

// finish sends the response once, and unparks the fetch everywhere. readBegin is when the read
// that produced results began.
func (f *fetchState) finish(results []fetchTopicResult, readBegin time.Time) {
	f.mu.Lock()
	if f.mu.done {
		f.mu.Unlock()
		return
	}
	f.mu.done = true
	f.r.readBegun = readBegin // request_timing.go
	f.mu.timer.Stop()
	waiting := f.mu.waiting
	f.mu.waiting = nil
	f.mu.Unlock()
	for _, p := range waiting {
		p.cancelAwait(f)
	}
	f.broker.respondFetch(f.r, f.req, 0, results)
}

// evaluateFetch reads what each partition has for the request, within the budgets. It reports the
// record bytes found and whether any partition failed (errors are answered at once). arrived is
// when the request reached the broker: a follower's position counts as of then, however often a
// parked fetch is evaluated.
func (b *Broker) evaluateFetch(req *kmsg.FetchRequest, arrived time.Time) ([]fetchTopicResult, int64, bool) {
	remaining := int64(req.MaxBytes)
	if req.Version < 3 || remaining <= 0 {
		remaining = 1<<31 - 1
	}
	var total int64
	failed := false
	results := make([]fetchTopicResult, 0, len(req.Topics))
	for _, rt := range req.Topics {
		topic := fetchTopicResult{topic: rt.Topic, topicID: rt.TopicID, partitions: make([]fetchPartitionResult, 0, len(rt.Partitions))}
		for _, rp := range rt.Partitions {
			result := fetchPartitionResult{partition: rp.Partition, fetchOffset: rp.FetchOffset, highWatermark: -1, lastStable: -1, logStartOffset: -1}
			if req.Version >= 13 && rt.Topic == "" {
				result.errorCode = protocol.UnknownTopicID.Code
				failed = true
				topic.partitions = append(topic.partitions, result)
				continue
			}
			p, err := b.registry.partition(rt.Topic, rp.Partition)
			if err != nil {
				result.errorCode = protocol.CodeFor(err)
				failed = true
				topic.partitions = append(topic.partitions, result)
				continue
			}
			log := p.log
			result.logStartOffset = log.LogStartOffset()
			// Consumers read below the high watermark; a follower reads the whole log, and its
			// fetch reports its position (replication.Replica.FollowerFetched).
			upTo := p.replica.HighWatermark()
			if req.ReplicaID >= 0 {
				high, err := b.followerFetched(p, req.ReplicaID, rp, arrived)
				if err != nil {
					result.errorCode = protocol.CodeFor(err)
					failed = true
					topic.partitions = append(topic.partitions, result)
					continue
				}
				upTo = log.LogEndOffset()
				result.highWatermark = high
			} else {
				result.highWatermark = upTo
				if result.lastStable, err = b.fetchUpTo(p, req.IsolationLevel, upTo); err != nil {
					result.errorCode = protocol.KafkaStorageError.Code
					failed = true
					topic.partitions = append(topic.partitions, result)
					continue
				}
				upTo = result.lastStable
				if epoch := p.state.Load().leaderEpoch; req.Version >= 9 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch != epoch {
					result.errorCode = protocol.FencedLeaderEpoch.Code
					if rp.CurrentLeaderEpoch > epoch {
						result.errorCode = protocol.UnknownLeaderEpoch.Code
					}
					failed = true
					topic.partitions = append(topic.partitions, result)
					continue
				}
			}
			if req.ReplicaID >= 0 && rp.PartitionMaxBytes == 0 {
				// An acknowledgement from a follower: its position only, no data.
				topic.partitions = append(topic.partitions, result)
				continue
			}
			budget := min(int64(rp.PartitionMaxBytes), remaining)
			if total == 0 {
				budget = max(budget, 1) // KIP-74: the first batch found goes out whatever its size
			}
			if budget > 0 {
				slice, err := log.Slice(rp.FetchOffset, budget, upTo)
				switch {
				case errors.Is(err, segment.ErrOffsetOutOfRange):
					result.errorCode = protocol.OffsetOutOfRange.Code
					failed = true
				case errors.Is(err, segment.ErrCorrupt):
					result.errorCode = protocol.CorruptMessage.Code
					failed = true
					if req.ReplicaID >= 0 { // this leader cannot serve its own log: partition_damage.go
						b.replicas.LeaderReadDamaged(p.replica, rp.FetchOffset, err)
					}
				case err != nil:
					b.logger.Error("fetch read", "topic", rt.Topic, "partition", rp.Partition, "offset", rp.FetchOffset, "err", err)
					result.errorCode = protocol.KafkaStorageError.Code
					failed = true
				default:
					result.slice = slice
					total += slice.Size
					remaining -= slice.Size
					if req.IsolationLevel == 1 && req.ReplicaID < 0 && slice.Size > 0 {
						result.aborted = p.abortedTransactions(rp.FetchOffset, upTo)
					}
				}
			}
			topic.partitions = append(topic.partitions, result)
		}
		results = append(results, topic)
	}
	return results, total, failed
}

// respondFetch frames the response by hand: header and fields in byte chunks, records as file
// chunks between them.
func (b *Broker) respondFetch(r *request, req *kmsg.FetchRequest, errorCode int16, results []fetchTopicResult) {
	results = append(results, r.deniedFetch...) // refused by the authorizer (authorize.go)
	version := req.Version
	flexible := version >= 12
	buf := protocol.AppendResponseHeader(make([]byte, 0, 256), r.header)
	buf = appendInt32(buf, 0) // throttle
	if version >= 7 {
		buf = appendInt16(buf, errorCode)
		buf = appendInt32(buf, 0) // session id: sessions declined
	}
	var chunks []netpoll.Chunk
	var sent int64
	buf = appendArrayLength(buf, len(results), flexible)
	for _, topic := range results {
		if version >= 13 {
			buf = append(buf, topic.topicID[:]...)
		} else {
			buf = appendString(buf, topic.topic, flexible)
		}
		buf = appendArrayLength(buf, len(topic.partitions), flexible)
		for _, p := range topic.partitions {
			buf = appendInt32(buf, p.partition)
			buf = appendInt16(buf, p.errorCode)
			buf = appendInt64(buf, p.highWatermark)
			buf = appendInt64(buf, p.lastStable)
			if version >= 5 {
				buf = appendInt64(buf, p.logStartOffset)
			}
			buf = appendAbortedTransactions(buf, req.IsolationLevel, p.aborted, flexible)
			if version >= 11 {
				buf = appendInt32(buf, -1) // preferred read replica
			}
			buf = appendBytesLength(buf, int(p.slice.Size), flexible)
			if p.slice.Size > 0 {
				chunks = append(chunks, netpoll.Chunk{Bytes: buf}, netpoll.Chunk{File: p.slice.File, FileOffset: p.slice.Position, FileLength: p.slice.Size})
				sent += p.slice.Size
				buf = make([]byte, 0, 128)
			}
			buf = appendNoTags(buf, flexible)
		}
		buf = appendNoTags(buf, flexible)
	}
	buf = appendNoTags(buf, flexible)
	chunks = append(chunks, netpoll.Chunk{Bytes: buf})
	if req.ReplicaID >= 0 {
		b.metrics.replicationSentBytes.Add(int(sent))
	} else {
		b.metrics.fetchedBytes.Add(int(sent))
		b.metrics.topics.countFetch(results) // metrics_topics.go
	}
	if errorCode != 0 {
		r.failed()
	}
	r.markRead() // request_timing.go
	if req.ReplicaID < 0 {
		r.noteFetched(results) // request_trace.go
	}
	r.send(chunks...)
}
