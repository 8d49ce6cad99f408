package main

// The consume-transform-produce pattern of franz-go (GroupTransactSession) against sluiced: members
// run as separate processes (this test binary, re-executed) so that they can be killed with
// SIGKILL mid-transaction; the group rebalances as members die and join. Every input record must
// end up in the output exactly once for read_committed readers.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

// etlMemberEnv, when set ("broker group input output transactional-id franz|sluice"), makes the
// test binary run one ETL member, with franz-go or sluice's client, instead of the tests (see
// TestMain).
const etlMemberEnv = "SLUICE_TEST_ETL_MEMBER"

// runETLMember copies every record of input to output inside transactions that also commit the
// group's input offsets, until killed. It prints "committed <n>" after each committed transaction.
func runETLMember(spec string) int {
	fields := strings.Fields(spec)
	if len(fields) != 6 {
		fmt.Fprintln(os.Stderr, "etl member: want broker group input output transactional-id franz|sluice")
		return 2
	}
	broker, groupID, input, output, id := fields[0], fields[1], fields[2], fields[3], fields[4]
	if fields[5] == "sluice" {
		return runSluiceETLMember(broker, groupID, input, output, id)
	}
	session, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(broker), kgo.TransactionalID(id), kgo.TransactionTimeout(4*time.Second),
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(input), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.SessionTimeout(6*time.Second), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(output), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etl member:", err)
		return 1
	}
	defer session.Close()
	ctx := context.Background()
	for {
		fetches := session.PollRecords(ctx, 300)
		if fetches.IsClientClosed() {
			return 0
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			fmt.Fprintf(os.Stderr, "etl member %s: fetch %s-%d: %v\n", id, topic, partition, err)
		})
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := session.Begin(); err != nil {
			fmt.Fprintln(os.Stderr, "etl member: begin:", err)
			return 1
		}
		fetches.EachRecord(func(r *kgo.Record) {
			session.Produce(ctx, &kgo.Record{Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Fprintf(os.Stderr, "etl member %s: produce: %v\n", id, err)
				}
			})
		})
		committed, err := session.End(ctx, kgo.TryCommit)
		if err != nil {
			fmt.Fprintf(os.Stderr, "etl member %s: end: %v\n", id, err)
			continue
		}
		if committed {
			fmt.Printf("committed %d\n", fetches.NumRecords())
		}
	}
}

type etlMember struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
	count  int // records committed
}

func startETLMember(t *testing.T, broker, name, implementation string) *etlMember {
	t.Helper()
	m := &etlMember{name: name, exited: make(chan struct{})}
	m.cmd = exec.Command(os.Args[0], "-test.run=^$")
	m.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s etl etl-in etl-out etl-%s %s", etlMemberEnv, broker, name, implementation))
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.stderr.Write(p)
	})
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if n, ok := strings.CutPrefix(scanner.Text(), "committed "); ok {
				count, _ := strconv.Atoi(n)
				m.mu.Lock()
				m.count += count
				m.mu.Unlock()
			}
		}
		m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(m.kill)
	return m
}

func (m *etlMember) kill() {
	m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// committedTotal is the sum of the group's committed offsets over the input partitions.
func committedTotal(t *testing.T, client *kgo.Client, groupID, topic string, partitions int32) int64 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = groupID
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil || len(resp.Topics) == 0 {
		return 0
	}
	total := int64(0)
	for _, p := range resp.Topics[0].Partitions {
		total += max(p.Offset, 0)
	}
	return total
}

func TestTransactionalETLFranzGroupSession(t *testing.T) { runTransactionalETL(t, "franz") }

// TestTransactionalETLSluiceClient is the same pipeline with sluice's own client.
func TestTransactionalETLSluiceClient(t *testing.T) { runTransactionalETL(t, "sluice") }

func runTransactionalETL(t *testing.T, implementation string) {
	const records, partitions = 30_000, 4
	d := startDaemon(t, t.TempDir(), "--transaction-check-interval", "100ms")
	admin := newClient(t, d.kafka)
	createTopic(t, admin, "etl-in", partitions)
	createTopic(t, admin, "etl-out", partitions)
	// Uncompressed input, so both implementations read the same bytes.
	producer := newClient(t, d.kafka, kgo.DefaultProduceTopic("etl-in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range records {
		producer.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce input: %v", err)
			}
		})
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	members := map[string]*etlMember{}
	for _, name := range []string{"a", "b", "c"} {
		members[name] = startETLMember(t, d.kafka, name, implementation)
	}
	awaitCommitted := func(want int64, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for committedTotal(t, admin, "etl", "etl-in", partitions) < want {
			if time.Now().After(deadline) {
				var logs []string
				for _, m := range members {
					m.cmd.Process.Signal(syscall.SIGQUIT) // goroutine dumps into the logs below
					<-m.exited
				}
				for name, m := range members {
					m.mu.Lock()
					logs = append(logs, fmt.Sprintf("member %s (%d committed):\n%s", name, m.count, m.stderr.String()))
					m.mu.Unlock()
				}
				t.Fatalf("the group committed %d of %d input offsets within %v\n%s", committedTotal(t, admin, "etl", "etl-in", partitions), want, within, strings.Join(logs, "\n"))
			}
			time.Sleep(20 * time.Millisecond) // polling a condition, bounded by the deadline above
		}
	}
	// Kill a member mid-stream, let a new one join, twice.
	awaitCommitted(records/4, 60*time.Second)
	members["a"].kill()
	members["d"] = startETLMember(t, d.kafka, "d", implementation)
	awaitCommitted(records/2, 60*time.Second)
	members["b"].kill()
	members["e"] = startETLMember(t, d.kafka, "e", implementation)
	awaitCommitted(records, 90*time.Second)
	for _, m := range members {
		m.kill()
	}

	awaitStable(t, admin, "etl-out", partitions, 30*time.Second)
	produceEndMarks(t, d.kafka, "etl-out", partitions)
	seen := make([]int, records)
	for _, v := range readToEndMarks(t, d.kafka, "etl-out", partitions, true) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= records {
			t.Fatalf("output record %q is no input record", v)
		}
		seen[n]++
	}
	missing, duplicated := 0, 0
	for _, count := range seen {
		switch {
		case count == 0:
			missing++
		case count > 1:
			duplicated++
		}
	}
	if missing > 0 || duplicated > 0 {
		t.Fatalf("read_committed output: %d input records missing, %d duplicated", missing, duplicated)
	}
	uncommitted := len(readToEndMarks(t, d.kafka, "etl-out", partitions, false))
	t.Logf("%d input records in the output exactly once; %d output records including aborted ones", records, uncommitted)
}

// runSluiceETLMember is runETLMember with sluice's own client: a GroupConsumer reading
// read_committed without automatic commits, and a transactional Producer that commits the output
// and the group's offsets together. After a failed or aborted transaction it leaves and rejoins the
// group, so that it reads again from the committed offsets.
func runSluiceETLMember(broker, groupID, input, output, id string) int {
	ctx := context.Background()
	c, err := client.New(client.WithSeedBrokers(broker))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etl member:", err)
		return 1
	}
	producer, err := client.NewProducer(ctx, c, client.WithTransactionalID(id), client.WithTransactionTimeout(4*time.Second),
		client.WithLinger(time.Millisecond), client.WithPartitioner(client.ManualPartitioner()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etl member:", err)
		return 1
	}
	for {
		member, err := client.NewGroupConsumer(c, groupID, []string{input}, client.WithAutoCommitInterval(0), client.WithCommitOnRevoke(false),
			client.WithResetOffset(client.AtStart()), client.WithSessionTimeout(6*time.Second),
			client.WithGroupConsumerOptions(client.WithReadCommitted(), client.WithFetchMaxWait(200*time.Millisecond)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "etl member:", err)
			return 1
		}
		for {
			fetches, err := member.Poll(ctx)
			if err != nil {
				fmt.Fprintln(os.Stderr, "etl member: poll:", err)
				break
			}
			membership := member.Membership() // the generation these records were read in
			offsets := map[client.TopicPartition]int64{}
			var records []*client.Record
			for _, f := range fetches {
				if f.Err != nil {
					fmt.Fprintf(os.Stderr, "etl member %s: fetch %s-%d: %v\n", id, f.Topic, f.Partition, f.Err)
				}
				for _, r := range f.Records {
					records = append(records, r)
					offsets[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
				}
			}
			if len(records) == 0 {
				continue
			}
			if err := producer.BeginTransaction(); err != nil {
				fmt.Fprintln(os.Stderr, "etl member: begin:", err)
				return 1
			}
			for i, r := range records {
				producer.Produce(ctx, &client.Record{Topic: output, Partition: int32(i % 4), Value: r.Value}, nil)
			}
			err = producer.SendOffsets(ctx, groupID, membership, offsets)
			if err == nil {
				err = producer.CommitTransaction(ctx)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "etl member %s: %v; aborting and rejoining\n", id, err)
				if abortErr := producer.AbortTransaction(ctx); abortErr != nil {
					fmt.Fprintln(os.Stderr, "etl member: abort:", abortErr)
					return 1
				}
				break
			}
			fmt.Printf("committed %d\n", len(records))
		}
		member.Close(ctx)
	}
}
