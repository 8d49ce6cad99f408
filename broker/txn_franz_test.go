package broker

// Transactions end to end with franz-go's transactional producer and read_committed consumers
// against an in-process broker: commit and abort, the last stable offset of an open transaction,
// fencing of a zombie instance, and the coordinator's timeout abort.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/txn"
)

// produceTxn runs one transaction of count records valued prefix-i and ends it.
func produceTxn(t *testing.T, ctx context.Context, client *kgo.Client, topic, prefix string, count int, commit bool) {
	t.Helper()
	if err := client.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range count {
		if err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
			t.Fatalf("produce %s-%d: %v", prefix, i, err)
		}
	}
	if err := client.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction %s: %v", prefix, err)
	}
}

// endMark is produced (non-transactionally) to every partition after what a test wrote: a reader
// that saw it everywhere saw everything before it.
const endMark = "END"

func produceEndMarks(t *testing.T, ctx context.Context, b *Broker, topic string, partitions int32) {
	t.Helper()
	client := franzClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer client.Close()
	for p := range partitions {
		if err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(endMark)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads topic from the start until the end mark of every partition and returns the other
// record values, at the isolation level.
func readAll(t *testing.T, ctx context.Context, b *Broker, topic string, partitions int32, committed bool) []string {
	t.Helper()
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	client := franzClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	defer client.Close()
	var values []string
	ended := map[int32]bool{}
	for int32(len(ended)) < partitions {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %v (have %d records, %d partitions ended)", topic, ctx.Err(), len(values), len(ended))
		}
		fetches.EachError(func(topic string, partition int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, partition, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == endMark {
				ended[r.Partition] = true
			} else {
				values = append(values, string(r.Value))
			}
		})
	}
	return values
}

// listEnds asks ListOffsets for the latest offset of every partition of topic, at the isolation
// level.
func listEnds(t *testing.T, ctx context.Context, b *Broker, topic string, committed bool) map[int32]int64 {
	t.Helper()
	client := franzClient(t, b)
	defer client.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	partitions := b.coordinator.Metadata().Topics[topic].Partitions
	for i := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = int32(i), -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("list offsets %s-%d: %v", topic, p.Partition, err)
		}
		ends[p.Partition] = p.Offset
	}
	return ends
}

func txnClient(t *testing.T, b *Broker, id string, opts ...kgo.Opt) *kgo.Client {
	return franzClient(t, b, append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(10 * time.Second),
		kgo.DefaultProduceTopic("unused")}, opts...)...)
}

func TestTransactionsFranzCommitAbort(t *testing.T) {
	const topic = "txn-commit-abort"
	b := startBroker(t, nil)
	dial(t, b).createTopic(topic, 2, nil)
	ctx := groupTestContext(t)
	producer := txnClient(t, b, "commit-abort")

	produceTxn(t, ctx, producer, topic, "a", 10, true)
	produceTxn(t, ctx, producer, topic, "b", 5, false)
	produceTxn(t, ctx, producer, topic, "c", 3, true)

	// An open transaction holds the last stable offset at its first record.
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("d-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stable, high := listEnds(t, ctx, b, topic, true), listEnds(t, ctx, b, topic, false)
	open := int32(-1)
	for p := range int32(2) {
		if stable[p] > high[p] {
			t.Fatalf("partition %d: last stable offset %d above the high watermark %d", p, stable[p], high[p])
		}
		if stable[p] < high[p] {
			open = p
		}
	}
	if open < 0 {
		t.Fatalf("an open transaction left every last stable offset at the high watermark: %v %v", stable, high)
	}
	if start := openTxnStart(t, ctx, b, topic, open); start != stable[open] {
		t.Fatalf("DescribeProducers: open transaction starts at %d, last stable offset %d", start, stable[open])
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if stable, high := listEnds(t, ctx, b, topic, true), listEnds(t, ctx, b, topic, false); !maps.Equal(stable, high) {
		t.Fatalf("after the commit: last stable offsets %v, high watermarks %v", stable, high)
	}
	if start := openTxnStart(t, ctx, b, topic, open); start != -1 {
		t.Fatalf("DescribeProducers after the commit: open transaction at %d", start)
	}

	produceEndMarks(t, ctx, b, topic, 2)
	committed := readAll(t, ctx, b, topic, 2, true)
	uncommitted := readAll(t, ctx, b, topic, 2, false)
	count := func(values []string, prefix string) int {
		n := 0
		for _, v := range values {
			if strings.HasPrefix(v, prefix+"-") {
				n++
			}
		}
		return n
	}
	for _, want := range []struct {
		prefix                 string
		committed, uncommitted int
	}{{"a", 10, 10}, {"b", 0, 5}, {"c", 3, 3}, {"d", 1, 1}} {
		if got := count(committed, want.prefix); got != want.committed {
			t.Errorf("read_committed saw %d records of transaction %s, want %d", got, want.prefix, want.committed)
		}
		if got := count(uncommitted, want.prefix); got != want.uncommitted {
			t.Errorf("read_uncommitted saw %d records of transaction %s, want %d", got, want.prefix, want.uncommitted)
		}
	}
}

// TestTransactionsFranzFencing: a second instance with the same transactional id fences the first,
// whose open transaction is aborted and whose commit fails.
func TestTransactionsFranzFencing(t *testing.T) {
	const topic = "txn-fencing"
	b := startBroker(t, nil)
	dial(t, b).createTopic(topic, 1, nil)
	ctx := groupTestContext(t)

	zombie := txnClient(t, b, "fenced")
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := zombie.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "zombie-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	successor := txnClient(t, b, "fenced")
	produceTxn(t, ctx, successor, topic, "successor", 3, true)
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced instance committed its transaction")
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("zombie-late")}).FirstErr(); err == nil {
		t.Fatal("the fenced instance produced after being fenced")
	}
	produceEndMarks(t, ctx, b, topic, 1)
	committed := readAll(t, ctx, b, topic, 1, true)
	if !slices.Equal(committed, []string{"successor-0", "successor-1", "successor-2"}) {
		t.Fatalf("read_committed saw %q", committed)
	}
}

// TestTransactionsFranzTimeout: a transaction left open past its timeout is aborted by the
// coordinator; the last stable offset moves past it, and the producer recovers (KIP-588: it
// re-initializes from its old epoch) for its next transaction.
func TestTransactionsFranzTimeout(t *testing.T) {
	const topic = "txn-timeout"
	b := startBroker(t, func(c *Config) { c.Transactions.CheckInterval = 20 * time.Millisecond })
	dial(t, b).createTopic(topic, 1, nil)
	ctx := groupTestContext(t)

	producer := txnClient(t, b, "slow", kgo.TransactionTimeout(300*time.Millisecond))
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("abandoned")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		record, _ := b.coordinator.Transactions().Lookup("slow")
		if record.State == txn.CompleteAbort {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("transaction not aborted by its timeout: state %s", record.State)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if stable, high := listEnds(t, ctx, b, topic, true), listEnds(t, ctx, b, topic, false); !maps.Equal(stable, high) {
		t.Fatalf("after the timeout abort: last stable offsets %v, high watermarks %v", stable, high)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("a transaction aborted by its timeout committed")
	}
	if err := producer.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Logf("abort after the timeout: %v", err)
	}
	produceTxn(t, ctx, producer, topic, "after", 2, true)
	produceEndMarks(t, ctx, b, topic, 1)
	if committed := readAll(t, ctx, b, topic, 1, true); !slices.Equal(committed, []string{"after-0", "after-1"}) {
		t.Fatalf("read_committed saw %q", committed)
	}
}

// openTxnStart asks DescribeProducers for the first offset of the open transaction on a partition
// (-1 when no producer has one).
func openTxnStart(t *testing.T, ctx context.Context, b *Broker, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, franzClient(t, b))
	if err != nil {
		t.Fatal(err)
	}
	start := int64(-1)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("describe producers: error %d", p.ErrorCode)
		}
		for _, producer := range p.ActiveProducers {
			if producer.CurrentTxnStartOffset >= 0 {
				start = producer.CurrentTxnStartOffset
			}
		}
	}
	return start
}

// TestTransactionsCheckerFinishesDecided: a transaction whose commit was decided (PrepareCommit
// stored) by a coordinator that then died, before any marker, is finished by the coordinator that
// holds the id now: its markers are written and its records become visible.
func TestTransactionsCheckerFinishesDecided(t *testing.T) {
	const topic = "txn-decided"
	b := startBroker(t, func(c *Config) { c.Transactions.CheckInterval = 20 * time.Millisecond })
	dial(t, b).createTopic(topic, 2, nil)
	ctx := groupTestContext(t)
	producer := txnClient(t, b, "decided", kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "decided-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Decide the commit behind the producer's back, as EndTxn does before its markers.
	unlock := b.txns.lock("decided")
	current, version := b.txns.current("decided")
	next, _, err := txn.End(current, "decided", current.ProducerID, current.ProducerEpoch, true, time.Now().UnixMilli())
	if err == nil {
		_, err = b.txns.store(next, version)
	}
	unlock()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if stable, high := listEnds(t, ctx, b, topic, true), listEnds(t, ctx, b, topic, false); maps.Equal(stable, high) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the decided transaction was not finished")
		case <-time.After(10 * time.Millisecond):
		}
	}
	produceEndMarks(t, ctx, b, topic, 2)
	committed := readAll(t, ctx, b, topic, 2, true)
	slices.Sort(committed)
	if !slices.Equal(committed, []string{"decided-0", "decided-1", "decided-2", "decided-3"}) {
		t.Fatalf("read_committed saw %q", committed)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the producer's own commit of the finished transaction: %v", err)
	}
}

// TestTransactionsCheckpointOnCleanShutdown: a clean shutdown writes each partition's transaction
// checkpoint at its log end, with the open transaction in it; after the restart the transaction
// still holds the last stable offset, and aborting it releases it.
func TestTransactionsCheckpointOnCleanShutdown(t *testing.T) {
	const topic = "txn-checkpoint"
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	b := startBrokerWith(t, cfg)
	dial(t, b).createTopic(topic, 1, nil)
	ctx := groupTestContext(t)
	producer := txnClient(t, b, "checkpointed")
	produceTxn(t, ctx, producer, topic, "done", 3, true)
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stableBefore := listEnds(t, ctx, b, topic, true)[0]
	producer.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "topics", topic+"-0", txnCheckpointFile))
	if err != nil {
		t.Fatalf("no checkpoint after a clean shutdown: %v", err)
	}
	var checkpoint txnCheckpoint
	if err := json.Unmarshal(raw, &checkpoint); err != nil || checkpoint.Offset != 5 || len(checkpoint.Open) != 1 {
		t.Fatalf("checkpoint %s (%v), want offset 5 (3 records, a marker, the open record) and one open transaction", raw, err)
	}

	cfg.Metrics = metrics.NewSet() // a Set takes each name once
	b = startBrokerWith(t, cfg)
	if stable := listEnds(t, ctx, b, topic, true)[0]; stable != stableBefore {
		t.Fatalf("last stable offset %d after the restart, %d before", stable, stableBefore)
	}
	successor := txnClient(t, b, "checkpointed") // aborts the open transaction
	produceTxn(t, ctx, successor, topic, "after", 1, true)
	if stable, high := listEnds(t, ctx, b, topic, true), listEnds(t, ctx, b, topic, false); !maps.Equal(stable, high) {
		t.Fatalf("after the successor: last stable offsets %v, high watermarks %v", stable, high)
	}
}
