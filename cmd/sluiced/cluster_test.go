package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/localcluster"
)

// ackedRecord is a record the cluster acknowledged, where it said it put it.
type ackedRecord struct {
	partition int32
	offset    int64
	value     string
}

// loadGenerator produces keyed records continuously through one franz-go client and remembers
// every acknowledgement.
type loadGenerator struct {
	name   string
	client *kgo.Client
	topic  string
	mu     sync.Mutex
	acked  []ackedRecord
	errors map[string]int
	sent   atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

func startLoad(t *testing.T, c *localcluster.Cluster, name, topic string, opts ...kgo.Opt) *loadGenerator {
	opts = append([]kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.ProduceRequestTimeout(5 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MaxBufferedRecords(2000),
	}, opts...)
	g := &loadGenerator{name: name, client: clusterClient(t, c, opts...), topic: topic, errors: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go g.run()
	return g
}

func (g *loadGenerator) run() {
	defer close(g.done)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	for i := 0; ; i++ {
		select {
		case <-g.stop:
			return
		default:
		}
		value := fmt.Sprintf("%s-%d", g.name, i)
		inFlight.Add(1)
		g.sent.Add(1)
		g.client.Produce(context.Background(), &kgo.Record{Key: []byte("key-" + strconv.Itoa(i%500)), Value: []byte(value)}, func(r *kgo.Record, err error) {
			defer inFlight.Done()
			g.mu.Lock()
			defer g.mu.Unlock()
			if err != nil {
				g.errors[errorName(err)]++
				return
			}
			g.acked = append(g.acked, ackedRecord{r.Partition, r.Offset, value})
		})
	}
}

func errorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func (g *loadGenerator) ackedCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.acked)
}

// errorSummary lists the errors that records failed with so far, with their counts.
func (g *loadGenerator) errorSummary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprint(g.errors)
}

// finish stops producing and waits for every outstanding record's outcome.
func (g *loadGenerator) finish() []ackedRecord {
	close(g.stop)
	<-g.done
	g.client.Flush(context.Background())
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.acked
}

// readEverything consumes topic from the start up to each partition's current end.
func readEverything(t *testing.T, c *localcluster.Cluster, topic string, partitions int32) map[int32][]ackedRecord {
	t.Helper()
	client := clusterClient(t, c)
	ends := map[int32]int64{}
	eventually(t, 30*time.Second, "list end offsets", func() bool {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := range partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			return false
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return false
				}
				ends[p.Partition] = p.Offset
			}
		}
		return len(ends) == int(partitions)
	})
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range partitions {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	consumer := clusterClient(t, c, kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(200*time.Millisecond))
	out := map[int32][]ackedRecord{}
	remaining := 0
	for p := range partitions {
		if ends[p] > 0 {
			remaining++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for remaining > 0 {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back %s: gave up with %d partitions unfinished", topic, remaining)
		}
		fetches.EachError(func(_ string, p int32, err error) { t.Logf("fetch %s-%d: %v (retrying)", topic, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			out[r.Partition] = append(out[r.Partition], ackedRecord{r.Partition, r.Offset, string(r.Value)})
			if r.Offset == ends[r.Partition]-1 {
				remaining--
			}
		})
	}
	return out
}

// checkHistory asserts that every acknowledged record is where it was acknowledged, that offsets are
// dense, and, for idempotent producers, that no value appears twice.
func checkHistory(t *testing.T, read map[int32][]ackedRecord, acked []ackedRecord, idempotent func(value string) bool) {
	t.Helper()
	at := map[[2]int64]string{}
	seen := map[string]int{}
	for p, records := range read {
		for i, r := range records {
			if r.offset != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d: offsets not dense from 0", p, i, r.offset)
			}
			at[[2]int64{int64(p), r.offset}] = r.value
			seen[r.value]++
		}
	}
	lost := 0
	for _, a := range acked {
		if got, ok := at[[2]int64{int64(a.partition), a.offset}]; !ok || got != a.value {
			if lost < 10 {
				t.Errorf("acknowledged %q at %d/%d, found %q", a.value, a.partition, a.offset, got)
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged records lost or moved", lost, len(acked))
	}
	for value, n := range seen {
		if n > 1 && idempotent(value) {
			t.Errorf("idempotent record %q stored %d times", value, n)
		}
	}
}

// leaderOf waits for partition's leader (not -1) and returns it.
func leaderOf(t testing.TB, client *kgo.Client, topic string, partition int32) partitionInfo {
	t.Helper()
	var info partitionInfo
	eventually(t, 20*time.Second, "a leader for "+topic, func() bool {
		parts, ok := describeTopic(client, topic)
		info = parts[partition]
		return ok && info.leader >= 0
	})
	return info
}

// awaitFullISR waits until every partition of topic has all its replicas in the ISR.
func awaitFullISR(t testing.TB, client *kgo.Client, topic string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "every replica back in the ISR of "+topic, func() bool {
		parts, ok := describeTopic(client, topic)
		if !ok {
			return false
		}
		for _, p := range parts {
			if p.leader < 0 || len(p.isr) != len(p.replicas) {
				return false
			}
		}
		return true
	})
}

// TestClusterKillLeaderUnderAcksAll is issue 10's first acceptance test: three nodes, RF=3 and
// min.insync.replicas=2, idempotent and plain producers with acks=all; the leader of partition 0 is
// killed with SIGKILL and restarted, several times. Every acknowledged record must be present at
// its partition and offset, offsets dense, idempotent records stored once, and the replicas
// byte-identical.
func TestClusterKillLeaderUnderAcksAll(t *testing.T) {
	const topic, partitions = "orders", 4
	c := startCluster(t, 3)
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)

	idempotent := startLoad(t, c, "idem", topic)
	plain := startLoad(t, c, "plain", topic, kgo.DisableIdempotentWrite())
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	for round := range rounds {
		before := idempotent.ackedCount() + plain.ackedCount()
		eventually(t, 30*time.Second, "records acknowledged before the kill", func() bool {
			return idempotent.ackedCount()+plain.ackedCount() > before+2000
		})
		victim := leaderOf(t, admin, topic, 0)
		killedAt := time.Now()
		c.Node(victim.leader).Kill()
		ackedAtKill := idempotent.ackedCount() + plain.ackedCount()
		eventually(t, 30*time.Second, "produce resumes on a new leader", func() bool {
			return idempotent.ackedCount()+plain.ackedCount() > ackedAtKill+500
		})
		t.Logf("round %d: killed node %d (leader of partition 0 at epoch %d); producing resumed within %v", round, victim.leader, victim.epoch, time.Since(killedAt).Round(time.Millisecond))
		if err := c.Node(victim.leader).Start(); err != nil {
			t.Fatal(err)
		}
		awaitFullISR(t, admin, topic, 60*time.Second)
	}
	ackedIdem, ackedPlain := idempotent.finish(), plain.finish()
	t.Logf("acknowledged: %d idempotent, %d plain; errors seen: %v %v", len(ackedIdem), len(ackedPlain), idempotent.errors, plain.errors)
	awaitFullISR(t, admin, topic, 60*time.Second)
	read := readEverything(t, c, topic, partitions)
	checkHistory(t, read, append(ackedIdem, ackedPlain...), func(v string) bool { return strings.HasPrefix(v, "idem-") })
	assertReplicasIdentical(t, c, topic, partitions)
}
