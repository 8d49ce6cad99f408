package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/chaos/history"
)

// workload runs the client operations of a run and records each in the history. Every goroutine
// it starts is stopped by stop (producers, readers, members, monitor, admin) and awaited.
type workload struct {
	config    Config
	bootstrap []string
	recorder  *history.Recorder
	topic     string
	acked     atomic.Int64
	failed    atomic.Int64
	nextID    atomic.Int32 // client ids for members that join later

	producers sync.WaitGroup // producers stop first, so that the rest can catch up
	others    sync.WaitGroup
	stopSend  chan struct{}
	stopAll   chan struct{}
	errMu     sync.Mutex
	errs      []error
}

func (w *workload) fail(err error) {
	w.errMu.Lock()
	w.errs = append(w.errs, err)
	w.errMu.Unlock()
}

// start launches every client; ids 1..Producers are producers (the clients ClientCut picks).
func (w *workload) start() error {
	w.stopSend, w.stopAll = make(chan struct{}), make(chan struct{})
	id := int32(0)
	for i := range w.config.Producers {
		id++
		idempotent := i%2 == 0
		opts := []kgo.Opt{
			kgo.DefaultProduceTopic(w.topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(5 * time.Millisecond),
			kgo.ProduceRequestTimeout(1500 * time.Millisecond), // see newClient

			kgo.RecordDeliveryTimeout(20 * time.Second),
			kgo.MaxBufferedRecords(500),
		}
		if !idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		client, err := newClient(w.bootstrap, id, opts...)
		if err != nil {
			return err
		}
		w.producers.Add(1)
		go w.produce(client, fmt.Sprintf("producer-%d", id), idempotent, uint64(id))
	}
	for range w.config.Readers {
		id++
		offsets := map[string]map[int32]kgo.Offset{w.topic: {}}
		for p := range w.config.Partitions {
			offsets[w.topic][int32(p)] = kgo.NewOffset().AtStart()
		}
		client, err := newClient(w.bootstrap, id, kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return err
		}
		w.others.Add(1)
		go w.read(client, fmt.Sprintf("reader-%d", id))
	}
	w.nextID.Store(id)
	for range w.config.Members {
		if err := w.join(); err != nil {
			return err
		}
	}
	monitorID := w.nextID.Add(1)
	monitor, err := newClient(w.bootstrap, monitorID)
	if err != nil {
		return err
	}
	w.others.Add(1)
	go w.monitor(monitor, fmt.Sprintf("monitor-%d", monitorID))
	if w.config.AdminChurn {
		adminID := w.nextID.Add(1)
		admin, err := newClient(w.bootstrap, adminID)
		if err != nil {
			return err
		}
		w.others.Add(1)
		go w.churn(admin, fmt.Sprintf("admin-%d", adminID))
	}
	return nil
}

// stopProducers stops sending and waits for every outstanding record's outcome.
func (w *workload) stopProducers() {
	close(w.stopSend)
	w.producers.Wait()
}

// stop ends the readers, members, monitor and admin.
func (w *workload) stop() {
	close(w.stopAll)
	w.others.Wait()
}

func (w *workload) produce(client *kgo.Client, process string, idempotent bool, seed uint64) {
	defer w.producers.Done()
	defer client.Close()
	rng := rand.New(rand.NewPCG(w.config.Seed, seed))
	interval := time.Second / time.Duration(max(w.config.Rate, 1))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var outstanding sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for op := int64(1); ; op++ {
		select {
		case <-w.stopSend:
			// Give what is buffered its chance, then fail the rest (recorded as indeterminate).
			flushCtx, cancelFlush := context.WithTimeout(context.Background(), 30*time.Second)
			client.Flush(flushCtx)
			cancelFlush()
			cancel()
			outstanding.Wait()
			return
		case <-tick.C:
		}
		value := fmt.Sprintf("%s-%d", process, op)
		key := fmt.Sprintf("k%d", rng.IntN(64))
		w.recorder.Record(history.Event{Process: process, Type: history.Invoke, F: history.Send, Op: op, Topic: w.topic, Key: key, Value: value, Idempotent: idempotent})
		outstanding.Add(1)
		client.Produce(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}, func(r *kgo.Record, err error) {
			defer outstanding.Done()
			if err != nil {
				w.failed.Add(1)
				w.recorder.Record(history.Event{Process: process, Type: history.Info, F: history.Send, Op: op, Topic: w.topic, Value: value, Error: errorText(err)})
				return
			}
			w.acked.Add(1)
			w.recorder.Record(history.Event{Process: process, Type: history.OK, F: history.Send, Op: op, Topic: w.topic, Partition: r.Partition, Offset: r.Offset, Value: value})
		})
	}
}

// pollRecords turns a fetch into history records of the topic.
func pollRecords(fetches kgo.Fetches, topic string) []history.Record {
	var records []history.Record
	fetches.EachRecord(func(r *kgo.Record) {
		if r.Topic == topic {
			records = append(records, history.Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		}
	})
	return records
}

// untilStopped is a context cancelled when stop closes.
func untilStopped(stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (w *workload) read(client *kgo.Client, process string) {
	defer w.others.Done()
	defer client.Close()
	ctx, cancel := untilStopped(w.stopAll)
	defer cancel()
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		if records := pollRecords(fetches, w.topic); len(records) > 0 {
			w.recorder.Record(history.Event{Process: process, Type: history.OK, F: history.Poll, Topic: w.topic, Records: records})
		}
	}
}

// commit commits what the member has consumed and records it as an operation.
func (w *workload) commit(ctx context.Context, client *kgo.Client, process string, op *atomic.Int64) {
	uncommitted := client.UncommittedOffsets()
	if len(uncommitted[w.topic]) == 0 {
		return
	}
	number := op.Add(1)
	w.recorder.Record(history.Event{Process: process, Type: history.Invoke, F: history.Commit, Op: number})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client.CommitOffsetsSync(ctx, uncommitted, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			w.recorder.Record(history.Event{Process: process, Type: history.Info, F: history.Commit, Op: number, Error: errorText(err)})
			return
		}
		committed := map[int32]int64{}
		var failure string
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if code := kerr.ErrorForCode(p.ErrorCode); code != nil {
					failure = errorText(code)
					continue
				}
				if t.Topic == w.topic {
					committed[p.Partition] = uncommitted[w.topic][p.Partition].Offset
				}
			}
		}
		if len(committed) == 0 {
			w.recorder.Record(history.Event{Process: process, Type: history.Info, F: history.Commit, Op: number, Error: failure})
			return
		}
		w.recorder.Record(history.Event{Process: process, Type: history.OK, F: history.Commit, Op: number, Offsets: committed, Error: failure})
	})
}

// join starts a new group member.
func (w *workload) join() error {
	id := w.nextID.Add(1)
	process := fmt.Sprintf("member-%d", id)
	var op atomic.Int64
	client, err := newClient(w.bootstrap, id,
		kgo.ConsumerGroup(w.config.Group), kgo.ConsumeTopics(w.topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.RebalanceTimeout(10*time.Second),
		kgo.OnPartitionsRevoked(func(ctx context.Context, client *kgo.Client, _ map[string][]int32) {
			w.commit(ctx, client, process, &op)
		}))
	if err != nil {
		return err
	}
	w.others.Add(1)
	go w.member(client, process, &op, uint64(id))
	return nil
}

// member consumes in the group and commits every second; now and then it leaves, and a new member
// joins in its place.
func (w *workload) member(client *kgo.Client, process string, op *atomic.Int64, seed uint64) {
	defer w.others.Done()
	ctx, cancel := untilStopped(w.stopAll)
	defer cancel()
	rng := rand.New(rand.NewPCG(w.config.Seed, seed))
	lifetime := time.Duration(0)
	if w.config.MemberLifetime > 0 {
		lifetime = w.config.MemberLifetime/2 + time.Duration(rng.Int64N(int64(w.config.MemberLifetime)))
	}
	born := time.Now()
	lastCommit := time.Now()
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		if records := pollRecords(fetches, w.topic); len(records) > 0 {
			w.recorder.Record(history.Event{Process: process, Type: history.OK, F: history.Poll, Topic: w.topic, Records: records})
		}
		if time.Since(lastCommit) > time.Second {
			w.commit(ctx, client, process, op)
			lastCommit = time.Now()
		}
		if lifetime > 0 && time.Since(born) > lifetime {
			break
		}
	}
	w.commit(context.Background(), client, process, op)
	client.LeaveGroup()
	client.Close()
	if ctx.Err() == nil {
		if err := w.join(); err != nil {
			w.fail(err)
		}
	}
}

// monitor reads the group's committed offsets twice a second.
func (w *workload) monitor(client *kgo.Client, process string) {
	defer w.others.Done()
	defer client.Close()
	ctx, cancel := untilStopped(w.stopAll)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for op := int64(1); ; op++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.recorder.Record(history.Event{Process: process, Type: history.Invoke, F: history.Committed, Op: op})
		offsets, err := fetchCommitted(ctx, client, w.config.Group, w.topic)
		if err != nil {
			w.recorder.Record(history.Event{Process: process, Type: history.Info, F: history.Committed, Op: op, Error: errorText(err)})
			continue
		}
		w.recorder.Record(history.Event{Process: process, Type: history.OK, F: history.Committed, Op: op, Offsets: offsets})
	}
}

// fetchCommitted is an OffsetFetch of every partition of topic the group committed.
func fetchCommitted(ctx context.Context, client *kgo.Client, group, topic string) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	offsets := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, err
			}
			if t.Topic == topic && p.Offset >= 0 {
				offsets[p.Partition] = p.Offset
			}
		}
	}
	return offsets, nil
}
