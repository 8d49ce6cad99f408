package main

// Transactions against the real sluiced: kcat (librdkafka) with read_committed and read_uncommitted,
// and kill -9 of the broker in the middle of a stream of transactions.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// endMark is produced non-transactionally to every partition once a test's transactions are
// resolved: a read_committed reader that saw it everywhere saw everything before it.
const endMark = "END"

func produceEndMarks(t testing.TB, address, topic string, partitions int32) {
	t.Helper()
	client := newClient(t, address, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := range partitions {
		if err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(endMark)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	client.Close()
}

// readToEndMarks reads topic from the start until the end mark of every partition, at the
// isolation level, and returns the other values.
func readToEndMarks(t testing.TB, address, topic string, partitions int32, committed bool) []string {
	t.Helper()
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	client := newClient(t, address, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var values []string
	ended := map[int32]bool{}
	for int32(len(ended)) < partitions {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %v (%d records, %d partitions ended)", topic, ctx.Err(), len(values), len(ended))
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

// latestOffsets lists the latest offset of every partition: the last stable offset when committed.
func latestOffsets(t testing.TB, client *kgo.Client, topic string, partitions int32, committed bool) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return nil, err
		}
		out[p.Partition] = p.Offset
	}
	return out, nil
}

// awaitStable waits until no transaction holds any partition's last stable offset back.
func awaitStable(t testing.TB, client *kgo.Client, topic string, partitions int32, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		stable, err1 := latestOffsets(t, client, topic, partitions, true)
		high, err2 := latestOffsets(t, client, topic, partitions, false)
		if err1 == nil && err2 == nil && maps.Equal(stable, high) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("last stable offsets %v (%v) still behind high watermarks %v (%v) after %v", stable, err1, high, err2, within)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, bounded by the deadline above
	}
}

func transactionalClient(t testing.TB, address, id string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, address, append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(3 * time.Second),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
}

// runTransaction produces count records prefix-i into topic in one transaction and ends it.
func runTransaction(ctx context.Context, client *kgo.Client, topic, prefix string, count int, commit bool) error {
	if err := client.BeginTransaction(); err != nil {
		return err
	}
	var wait sync.WaitGroup
	var mu sync.Mutex
	var produceErr error
	for i := range count {
		wait.Add(1)
		client.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				produceErr = err
				mu.Unlock()
			}
			wait.Done()
		})
	}
	wait.Wait()
	if produceErr != nil {
		client.EndTransaction(ctx, kgo.TryAbort)
		return produceErr
	}
	return client.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

func TestTransactionsKcatIsolation(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	d := startDaemon(t, t.TempDir())
	admin := newClient(t, d.kafka)
	createTopic(t, admin, "kcat-txn", 1)
	producer := transactionalClient(t, d.kafka, "kcat-txn")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, step := range []struct {
		prefix string
		commit bool
	}{{"committed", true}, {"aborted", false}, {"later", true}} {
		if err := runTransaction(ctx, producer, "kcat-txn", step.prefix, 5, step.commit); err != nil {
			t.Fatal(err)
		}
	}
	read := func(isolation string) []string {
		consume := exec.Command("kcat", "-C", "-b", d.kafka, "-t", "kcat-txn", "-o", "beginning", "-e", "-q", "-X", "isolation.level="+isolation)
		var stderr bytes.Buffer
		consume.Stderr = &stderr
		out, err := consume.Output()
		if err != nil {
			t.Fatalf("kcat -C %s: %v\n%s", isolation, err, stderr.String())
		}
		return strings.Fields(string(out))
	}
	count := func(values []string, prefix string) int {
		n := 0
		for _, v := range values {
			if strings.HasPrefix(v, prefix+"-") {
				n++
			}
		}
		return n
	}
	committed, uncommitted := read("read_committed"), read("read_uncommitted")
	if count(committed, "committed") != 5 || count(committed, "later") != 5 || count(committed, "aborted") != 0 {
		t.Fatalf("kcat read_committed saw %q", committed)
	}
	if count(uncommitted, "committed") != 5 || count(uncommitted, "later") != 5 || count(uncommitted, "aborted") != 5 {
		t.Fatalf("kcat read_uncommitted saw %q", uncommitted)
	}
	for name, want := range map[string]string{"sluice_transactions_committed_total": "2", "sluice_transactions_aborted_total": "1",
		"sluice_transactions_timed_out_total": "0", "sluice_transactions_open": "0"} {
		if got := d.metric(t, name); got != want {
			t.Errorf("%s = %q, want %s", name, got, want)
		}
	}
}

// TestTransactionsSurviveKill streams transactions (some aborted) over three partitions and kills
// the broker with SIGKILL at an arbitrary point of them, three times, each time also leaving one
// transaction open across the restart. After each restart the last stable offsets must catch up
// with the logs within the transaction timeout (open transactions are aborted, decided ones
// completed), and at the end every transaction is wholly visible or wholly invisible to
// read_committed readers: wholly visible when its commit was acknowledged, invisible when its abort
// was, or when it was left open.
func TestTransactionsSurviveKill(t *testing.T) {
	const topic, partitions, perTxn = "txn-crash", 3, 30
	dataDir := t.TempDir()
	args := []string{"--transaction-check-interval", "100ms"}
	d := startDaemon(t, dataDir, args...)
	createTopic(t, newClient(t, d.kafka), topic, partitions)

	outcome := map[string]string{} // prefix -> "committed", "aborted", "open", "unknown"
	for round := range 3 {
		open := transactionalClient(t, d.kafka, fmt.Sprintf("open-%d", round))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := open.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		openPrefix := fmt.Sprintf("open%d", round)
		for i := range perTxn {
			if err := open.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", openPrefix, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		outcome[openPrefix] = "open"

		producer := transactionalClient(t, d.kafka, "stream", kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(5*time.Second))
		done := make(chan struct{})
		enough := make(chan struct{})
		var mu sync.Mutex
		go func() {
			defer close(done)
			for k := 0; ; k++ {
				prefix := fmt.Sprintf("r%dt%d", round, k)
				commit := k%3 != 2
				mu.Lock()
				outcome[prefix] = "unknown"
				mu.Unlock()
				err := runTransaction(ctx, producer, topic, prefix, perTxn, commit)
				mu.Lock()
				switch {
				case err == nil && commit:
					outcome[prefix] = "committed"
				case err == nil:
					outcome[prefix] = "aborted"
				}
				mu.Unlock()
				if k == 15 {
					close(enough)
				}
				if err != nil {
					return // the broker is gone
				}
			}
		}()
		select {
		case <-enough:
		case <-done:
			t.Fatalf("round %d: the transaction stream stopped early", round)
		}
		d.kill()
		<-done
		cancel()
		producer.Close()
		open.Close()

		d = startDaemon(t, dataDir, args...)
		awaitStable(t, newClient(t, d.kafka), topic, partitions, 30*time.Second)
	}

	produceEndMarks(t, d.kafka, topic, partitions)
	counts := map[string]int{}
	for _, v := range readToEndMarks(t, d.kafka, topic, partitions, true) {
		prefix, _, _ := strings.Cut(v, "-")
		counts[prefix]++
	}
	for prefix, state := range outcome {
		got := counts[prefix]
		switch {
		case got != 0 && got != perTxn:
			t.Errorf("transaction %s (%s) partly visible: %d of %d records", prefix, state, got, perTxn)
		case state == "committed" && got != perTxn:
			t.Errorf("acknowledged commit %s: %d of %d records visible", prefix, got, perTxn)
		case (state == "aborted" || state == "open") && got != 0:
			t.Errorf("%s transaction %s: %d records visible", state, prefix, got)
		}
	}
	for prefix := range counts {
		if _, ok := outcome[prefix]; !ok {
			t.Errorf("records of unknown transaction %s", prefix)
		}
	}
	t.Logf("%d transactions checked: %v", len(outcome), counts)
}
