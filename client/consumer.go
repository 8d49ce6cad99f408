package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch is what one partition yielded to a Poll: records in offset order, or an error.
type Fetch struct {
	Topic          string
	Partition      int32
	Records        []*Record
	HighWatermark  int64
	LogStartOffset int64
	// Err, when set, stopped fetching of this partition (OFFSET_OUT_OF_RANGE, a corrupt batch, a
	// non-retriable error); Assign the partition again to resume. Retriable errors are retried
	// inside the consumer and never show here.
	Err error

	bytes int64 // fetched bytes charged to the consumer's buffer
}

// Assignment is a partition to read and where to start.
type Assignment struct {
	Topic     string
	Partition int32
	Offset    Offset
}

// Consumer reads assigned partitions. A background loop fetches ahead of Poll while less than the
// buffer bound (WithConsumerBufferBytes) is held; Poll hands over what was fetched.
//
// Assignment is explicit: the caller (and later a group member, which will drive Assign and
// Unassign from rebalances and commit Position) decides what is read. The consumer itself keeps no
// group state.
type Consumer struct {
	client  *Client
	cfg     consumerConfig
	decoder *decompressor
	// unsubscribe ends the metadata refresh wake-ups (Close).
	unsubscribe func()

	mu struct {
		sync.Mutex
		partitions    map[TopicPartition]*consumerPartition
		ready         []Fetch // fetched, not yet polled, in arrival order
		bufferedBytes int64
		busyLeaders   map[int32]bool // a fetch to this leader is outstanding
		closed        bool
	}
	wakeFetcher chan struct{} // capacity 1
	wakePoll    chan struct{} // capacity 1
	stop        chan struct{}
	workers     sync.WaitGroup
}

// consumerPartition is the fetch state of one assigned partition.
//
// Invariant: position <= fetchOffset; records in [position, fetchOffset) are buffered or in flight.
type consumerPartition struct {
	tp          TopicPartition
	fetchOffset int64     // next offset to fetch
	position    int64     // next offset Poll will return
	generation  uint64    // bumped by each Assign, so answers to older fetches are dropped
	stopped     error     // set when an error stopped fetching
	inFlight    bool      // a fetch for this partition is outstanding
	retryAt     time.Time // no fetch before this after a retriable error
}

// NewConsumer returns a consumer reading through c, with nothing assigned.
func NewConsumer(c *Client, opts ...ConsumerOption) (*Consumer, error) {
	cfg := defaultConsumerConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.fetchMaxWait < 0 || cfg.fetchMaxBytes <= 0 || cfg.fetchMaxPartitionBytes <= 0 || cfg.maxBufferedBytes <= 0 {
		return nil, errors.New("client: invalid consumer options: sizes must be positive and max wait not negative")
	}
	decoder, err := newDecompressor()
	if err != nil {
		return nil, err
	}
	consumer := &Consumer{
		client:      c,
		cfg:         cfg,
		decoder:     decoder,
		wakeFetcher: make(chan struct{}, 1),
		wakePoll:    make(chan struct{}, 1),
		stop:        make(chan struct{}),
	}
	consumer.mu.partitions = make(map[TopicPartition]*consumerPartition)
	consumer.mu.busyLeaders = make(map[int32]bool)
	consumer.unsubscribe = c.metadata.subscribe(consumer.wake)
	consumer.workers.Add(1)
	go func() {
		defer consumer.workers.Done()
		consumer.runFetcher()
	}()
	return consumer, nil
}

// Assign adds partitions to read (or moves an assigned partition to a new offset), resolving
// start, end and time offsets with ListOffsets first. Records buffered for a reassigned partition
// are dropped.
func (c *Consumer) Assign(ctx context.Context, assignments ...Assignment) error {
	queries := map[TopicPartition]int64{}
	resolved := map[TopicPartition]int64{}
	for _, a := range assignments {
		tp := TopicPartition{a.Topic, a.Partition}
		if a.Offset.kind == offsetExact {
			resolved[tp] = a.Offset.value
		} else {
			queries[tp] = a.Offset.listOffsetsTimestamp()
		}
		c.client.metadata.use(a.Topic)
	}
	if len(queries) > 0 {
		listed, err := c.client.listOffsets(ctx, queries)
		if err != nil {
			return fmt.Errorf("client: assign: %w", err)
		}
		var ends map[TopicPartition]int64
		for tp, l := range listed {
			if l.Err != nil {
				return fmt.Errorf("client: assign: %w", l.Err)
			}
			if l.Offset < 0 { // a time after every record: start at the end
				if ends == nil {
					ends = map[TopicPartition]int64{}
				}
				ends[tp] = -1
				continue
			}
			resolved[tp] = l.Offset
		}
		if len(ends) > 0 {
			listed, err := c.client.listOffsets(ctx, ends)
			if err != nil {
				return fmt.Errorf("client: assign: %w", err)
			}
			for tp, l := range listed {
				if l.Err != nil {
					return fmt.Errorf("client: assign: %w", l.Err)
				}
				resolved[tp] = l.Offset
			}
		}
	}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	for tp, offset := range resolved {
		partition := c.mu.partitions[tp]
		if partition == nil {
			partition = &consumerPartition{tp: tp}
			c.mu.partitions[tp] = partition
		}
		partition.generation++
		partition.fetchOffset, partition.position = offset, offset
		partition.stopped, partition.retryAt = nil, time.Time{}
		c.dropBufferedLocked(tp)
	}
	c.mu.Unlock()
	c.wake()
	return nil
}

// Unassign stops reading partitions and drops what was buffered for them.
func (c *Consumer) Unassign(partitions ...TopicPartition) {
	c.mu.Lock()
	for _, tp := range partitions {
		delete(c.mu.partitions, tp)
		c.dropBufferedLocked(tp)
	}
	c.mu.Unlock()
	c.wake()
}

// unassignWithPositions is Unassign that also returns the partitions' positions, read under the
// same lock Poll advances them under: Poll returns no record of them after their position was
// taken. A group member commits these on revocation. Partitions not assigned are left out.
func (c *Consumer) unassignWithPositions(partitions []TopicPartition) map[TopicPartition]int64 {
	positions := make(map[TopicPartition]int64, len(partitions))
	c.mu.Lock()
	for _, tp := range partitions {
		if partition := c.mu.partitions[tp]; partition != nil {
			positions[tp] = partition.position
		}
		delete(c.mu.partitions, tp)
		c.dropBufferedLocked(tp)
	}
	c.mu.Unlock()
	c.wake()
	return positions
}

// Assigned lists the assigned partitions.
func (c *Consumer) Assigned() []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicPartition, 0, len(c.mu.partitions))
	for tp := range c.mu.partitions {
		out = append(out, tp)
	}
	return out
}

// Position is the offset of the next record Poll will return for tp: what a group commits.
func (c *Consumer) Position(tp TopicPartition) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	partition := c.mu.partitions[tp]
	if partition == nil {
		return -1, fmt.Errorf("%w: %s-%d", ErrNotAssigned, tp.Topic, tp.Partition)
	}
	return partition.position, nil
}

func (c *Consumer) dropBufferedLocked(tp TopicPartition) {
	kept := c.mu.ready[:0]
	for _, f := range c.mu.ready {
		if f.Topic == tp.Topic && f.Partition == tp.Partition {
			c.mu.bufferedBytes -= f.bytes
			continue
		}
		kept = append(kept, f)
	}
	clear(c.mu.ready[len(kept):])
	c.mu.ready = kept
}

// Poll waits until something was fetched (or ctx ends) and returns everything buffered: per
// partition, records in offset order. A partition may appear more than once, in order.
func (c *Consumer) Poll(ctx context.Context) ([]Fetch, error) {
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if len(c.mu.ready) > 0 {
			fetches := c.mu.ready
			c.mu.ready = nil
			for _, f := range fetches {
				c.mu.bufferedBytes -= f.bytes
				if partition := c.mu.partitions[TopicPartition{f.Topic, f.Partition}]; partition != nil && len(f.Records) > 0 {
					partition.position = f.Records[len(f.Records)-1].Offset + 1
				}
			}
			c.mu.Unlock()
			c.wake()
			return fetches, nil
		}
		c.mu.Unlock()
		select {
		case <-c.wakePoll:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops fetching and waits for the fetch loop. Buffered records are dropped.
func (c *Consumer) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.mu.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.unsubscribe()
	c.workers.Wait()
	c.decoder.close()
	select {
	case c.wakePoll <- struct{}{}:
	default:
	}
	return nil
}

func (c *Consumer) wake() {
	select {
	case c.wakeFetcher <- struct{}{}:
	default:
	}
}

func (c *Consumer) signalPoll() {
	select {
	case c.wakePoll <- struct{}{}:
	default:
	}
}

// runFetcher keeps one fetch outstanding per leader for the partitions that have none, while the
// buffer has room.
func (c *Consumer) runFetcher() {
	runPasses(c.stop, c.wakeFetcher, c.startFetches)
}

// fetchTarget is one partition in a fetch request.
type fetchTarget struct {
	partition  *consumerPartition
	offset     int64
	generation uint64
}

func (c *Consumer) startFetches(now time.Time) (next time.Time) {
	byLeader := map[int32][]fetchTarget{}
	needMetadata := false
	c.mu.Lock()
	if c.mu.bufferedBytes >= c.cfg.maxBufferedBytes {
		c.mu.Unlock()
		return time.Time{} // Poll wakes us
	}
	for _, partition := range c.mu.partitions {
		if partition.inFlight || partition.stopped != nil {
			continue
		}
		if now.Before(partition.retryAt) {
			if next.IsZero() || partition.retryAt.Before(next) {
				next = partition.retryAt
			}
			continue
		}
		leader := int32(-1)
		if info := c.client.metadata.cached(partition.tp.Topic); info != nil && int(partition.tp.Partition) < len(info.partitions) {
			leader = info.partitions[partition.tp.Partition].leader
		}
		if leader < 0 {
			needMetadata = true
			partition.retryAt = now.Add(100 * time.Millisecond)
			continue
		}
		if c.mu.busyLeaders[leader] {
			continue
		}
		byLeader[leader] = append(byLeader[leader], fetchTarget{partition, partition.fetchOffset, partition.generation})
	}
	for leader, targets := range byLeader {
		c.mu.busyLeaders[leader] = true
		for _, t := range targets {
			t.partition.inFlight = true
		}
	}
	c.mu.Unlock()
	if needMetadata {
		c.client.metadata.requestRefresh()
	}
	for leader, targets := range byLeader {
		c.workers.Add(1)
		go func() {
			defer c.workers.Done()
			c.fetchFrom(leader, targets)
		}()
	}
	return next
}

// fetchFrom sends one fetch to leader and buffers what it returns.
func (c *Consumer) fetchFrom(leader int32, targets []fetchTarget) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(c.cfg.fetchMaxWait / time.Millisecond)
	req.MinBytes = c.cfg.fetchMinBytes
	req.MaxBytes = c.cfg.fetchMaxBytes
	if c.cfg.readCommitted {
		req.IsolationLevel = 1
	}
	req.SessionID, req.SessionEpoch = 0, -1
	topicIndex := map[string]int{}
	for _, t := range targets {
		index, ok := topicIndex[t.partition.tp.Topic]
		if !ok {
			index = len(req.Topics)
			topicIndex[t.partition.tp.Topic] = index
			topic := kmsg.NewFetchRequestTopic()
			topic.Topic = t.partition.tp.Topic
			req.Topics = append(req.Topics, topic)
		}
		part := kmsg.NewFetchRequestTopicPartition()
		part.Partition, part.FetchOffset, part.PartitionMaxBytes = t.partition.tp.Partition, t.offset, c.cfg.fetchMaxPartitionBytes
		part.CurrentLeaderEpoch, part.LogStartOffset = -1, -1
		req.Topics[index].Partitions = append(req.Topics[index].Partitions, part)
	}

	var resp *kmsg.FetchResponse
	conn, err := c.client.pool.conn(ctx, leader, roleFetch)
	if err == nil {
		var raw kmsg.Response
		if raw, err = conn.roundTrip(ctx, req); err == nil {
			resp = raw.(*kmsg.FetchResponse)
			if resp.ErrorCode != 0 {
				err = newKafkaError("fetch", "", -1, resp.ErrorCode, nil)
			}
		}
	}

	results := map[TopicPartition]*kmsg.FetchResponseTopicPartition{}
	if resp != nil {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				p := &resp.Topics[i].Partitions[j]
				results[TopicPartition{resp.Topics[i].Topic, p.Partition}] = p
			}
		}
	}
	// Decoding happens outside the lock; the generation check below discards stale work.
	type decoded struct {
		fetch Fetch
		next  int64
		retry bool // a retriable error: back off and fetch again
	}
	outcomes := make([]decoded, len(targets))
	refresh := false
	for i, t := range targets {
		tp := t.partition.tp
		out := &outcomes[i]
		out.next = t.offset
		out.fetch = Fetch{Topic: tp.Topic, Partition: tp.Partition}
		if err != nil {
			out.retry = IsRetriable(err) || errors.Is(err, context.Canceled)
			out.fetch.Err = err
			continue
		}
		p := results[tp]
		if p == nil {
			out.retry = true
			continue
		}
		out.fetch.HighWatermark, out.fetch.LogStartOffset = p.HighWatermark, p.LogStartOffset
		if p.ErrorCode != 0 {
			kafkaErr := newKafkaError("fetch", tp.Topic, tp.Partition, p.ErrorCode, nil)
			out.fetch.Err, out.retry = kafkaErr, kafkaErr.Retriable
			refresh = refresh || kafkaErr.Retriable
			continue
		}
		var aborted *abortedFilter
		if c.cfg.readCommitted {
			aborted = newAbortedFilter(p.AbortedTransactions)
		}
		records, nextOffset, decodeErr := decodeBatches(p.RecordBatches, tp, t.offset, c.decoder, aborted)
		out.fetch.Records, out.next, out.fetch.Err = records, nextOffset, decodeErr
		out.fetch.bytes = int64(len(p.RecordBatches))
	}
	if err != nil || refresh {
		c.client.metadata.requestRefresh()
	}

	now := time.Now()
	delivered := false
	c.mu.Lock()
	delete(c.mu.busyLeaders, leader)
	for i, t := range targets {
		out := outcomes[i]
		partition := c.mu.partitions[t.partition.tp]
		if partition != t.partition || partition.generation != t.generation {
			continue // unassigned or reassigned meanwhile
		}
		partition.inFlight = false
		switch {
		case out.retry:
			partition.retryAt = now.Add(100 * time.Millisecond)
			continue
		case out.fetch.Err != nil:
			partition.stopped = out.fetch.Err
		}
		partition.fetchOffset = out.next
		if len(out.fetch.Records) > 0 || out.fetch.Err != nil {
			c.mu.ready = append(c.mu.ready, out.fetch)
			c.mu.bufferedBytes += out.fetch.bytes
			delivered = true
		}
	}
	c.mu.Unlock()
	if delivered {
		c.signalPoll()
	}
	c.wake()
}
