package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkClusterFailover measures a failover as a producer sees it: from kill -9 of a partition's
// leader to the first acks=all record acknowledged after the kill by another broker (the new
// leader), once per iteration. The killed node is restarted and back in the ISR before the next.
// Run it with `make bench-failover` (20 kills); it reports the median and the longest failover.
//
// The topic has one partition per node and leadership is put back on the preferred replicas before
// each kill, so that every node leads one partition; the kills alternate between the leader that
// is also the Raft controller (its failover includes a controller election) and one that is not,
// and each kind's median and longest are reported too.
func BenchmarkClusterFailover(b *testing.B) {
	const topic, nodes = "failover", 3
	c := startCluster(b, nodes)
	admin := clusterClient(b, c)
	createReplicatedTopic(b, admin, topic, nodes, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(b, admin, topic, 60*time.Second)
	acks := &ackLog{}
	producerLog := &recentLog{} // the producer's own log, reported when a kill finds no leader acking
	var target atomic.Int32     // the partition the producer writes to
	producer := clusterClient(b, c, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(acks),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.WithLogger(producerLog))

	// One record in flight at a time, so that an acknowledgement's time is close to when the
	// new leader could first take it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lastError atomic.Value // the producer's last error, for a failure report
	lastError.Store("none")
	var sending atomic.Value // the record being sent, for a failure report
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			partition := target.Load()
			sending.Store(fmt.Sprintf("partition %d since %s", partition, time.Now().Format("15:04:05.000")))
			if err := producer.ProduceSync(ctx, &kgo.Record{Partition: partition, Value: []byte("tick")}).FirstErr(); err != nil {
				lastError.Store(fmt.Sprintf("partition %d at %s: %v", partition, time.Now().Format("15:04:05.000"), err))
			}
		}
	}()
	var all, ofController, ofOthers []time.Duration
	var summary []string
	b.ResetTimer()
	for i := range b.N {
		killController := i%2 == 0
		partition, victim := pickVictim(b, admin, topic, killController)
		target.Store(partition)
		for deadline := time.Now().Add(30 * time.Second); ; {
			if _, ok := acks.first(partition, func(node int32) bool { return node == victim }, time.Now().Add(-100*time.Millisecond)); ok {
				break
			}
			if time.Now().After(deadline) {
				parts, _ := describeTopic(admin, topic)
				b.Fatalf("kill %d: no acknowledgement by leader %d of partition %d within 30s; the producer's last error: %v; sending %v; partitions %+v; the producer's last log lines:\n%s",
					i+1, victim, partition, lastError.Load(), sending.Load(), parts, producerLog.String())
			}
			time.Sleep(50 * time.Millisecond) // polling, as eventually does
		}
		killed := time.Now()
		c.Node(victim).Kill()
		// When the metadata first names another leader: the detection half of the failover, for
		// telling a slow fence from a slow first acknowledgement.
		var leaderMoved time.Duration
		var failover time.Duration
		eventually(b, 60*time.Second, "an acknowledgement by another broker after the kill", func() bool {
			if leaderMoved == 0 {
				if parts, ok := describeTopic(admin, topic); ok && parts[partition].leader >= 0 && parts[partition].leader != victim {
					leaderMoved = time.Since(killed)
				}
			}
			at, ok := acks.first(partition, func(node int32) bool { return node != victim }, killed)
			failover = at.Sub(killed)
			return ok
		})
		all = append(all, failover)
		kind := "other"
		if killController {
			ofController, kind = append(ofController, failover), "controller"
		} else {
			ofOthers = append(ofOthers, failover)
		}
		moved := "after the ack"
		if leaderMoved > 0 {
			moved = leaderMoved.Round(10 * time.Millisecond).String()
		}
		summary = append(summary, fmt.Sprintf("%s %v (new leader seen %s)", kind, failover.Round(time.Millisecond), moved))
		if err := c.Node(victim).Start(); err != nil {
			b.Fatal(err)
		}
		awaitFullISRReporting(b, admin, topic, i+1)
		acks.reset()
	}
	b.StopTimer()
	cancel()
	<-done
	b.Logf("failovers in kill order: %s", strings.Join(summary, ", "))
	report := func(durations []time.Duration, name string) {
		if len(durations) == 0 {
			return
		}
		slices.Sort(durations)
		b.ReportMetric(float64(durations[len(durations)/2].Milliseconds()), "p50-"+name+"ms")
		b.ReportMetric(float64(durations[len(durations)-1].Milliseconds()), "max-"+name+"ms")
	}
	report(all, "failover-")
	report(ofController, "controller-kill-")
	report(ofOthers, "other-kill-")
	b.ReportMetric(0, "ns/op") // the wall time of an iteration includes the restart: not a figure
}

// ackLog records every acknowledged batch with the broker that acknowledged it (a kgo hook).
type ackLog struct {
	mu     sync.Mutex
	events []ackEvent
}

type ackEvent struct {
	at        time.Time
	partition int32
	node      int32
}

func (l *ackLog) OnProduceBatchWritten(meta kgo.BrokerMetadata, _ string, partition int32, _ kgo.ProduceBatchMetrics) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ackEvent{at: now, partition: partition, node: meta.NodeID})
}

// first is the time of the first acknowledgement on partition after since by a node that matches.
func (l *ackLog) first(partition int32, by func(node int32) bool, since time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.partition == partition && e.at.After(since) && by(e.node) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

func (l *ackLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = nil
}

// pickVictim moves leadership back to the preferred replicas (one partition per node) and returns
// a partition whose leader is the controller (controller true) or is not, with that leader.
func pickVictim(b *testing.B, client *kgo.Client, topic string, controller bool) (partition, leader int32) {
	b.Helper()
	// The victim comes from the answer that showed every leader on its preferred replica: a second
	// Metadata request may reach a broker that has not applied the elections yet and name a
	// leader of before them, whose acknowledgement the kill would then wait for in vain (it did,
	// for 30 s, in one run of 20 kills in three).
	var parts map[int32]partitionInfo
	eventually(b, 60*time.Second, "leaders on the preferred replicas", func() bool {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType, req.TimeoutMillis = 0, 10_000
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if _, err := req.RequestWith(ctx, client); err != nil {
			return false
		}
		var ok bool
		if parts, ok = describeTopic(client, topic); !ok {
			return false
		}
		for _, p := range parts {
			if p.leader != p.replicas[0] || len(p.isr) != len(p.replicas) {
				return false
			}
		}
		return true
	})
	id := controllerOf(b, client)
	for _, index := range slices.Sorted(maps.Keys(parts)) {
		if p := parts[index]; (p.leader == id) == controller {
			return index, p.leader
		}
	}
	b.Fatalf("no partition of %s led by %s node than the controller %d: %+v", topic, map[bool]string{true: "the same", false: "another"}[controller], id, parts)
	return -1, -1
}

// controllerOf asks the cluster which node is the controller.
func controllerOf(t testing.TB, client *kgo.Client) int32 {
	t.Helper()
	var controller int32 = -1
	eventually(t, 20*time.Second, "a controller", func() bool {
		req := kmsg.NewPtrMetadataRequest()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, client)
		if err == nil {
			controller = resp.ControllerID
		}
		return err == nil && controller > 0
	})
	return controller
}

// awaitFullISRReporting is awaitFullISR that names the partitions still short when it gives up.
func awaitFullISRReporting(b *testing.B, client *kgo.Client, topic string, kill int) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		parts, ok := describeTopic(client, topic)
		full := ok
		for _, p := range parts {
			full = full && p.leader >= 0 && len(p.isr) == len(p.replicas)
		}
		if full {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("after kill %d: the ISR of %s not full within 60s: %+v", kill, topic, parts)
		}
		<-poll.C
	}
}

// recentLog keeps a kgo client's last log lines (a kgo.Logger), for failure reports.
type recentLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *recentLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *recentLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	line := fmt.Sprintf("%s %s %s %v", time.Now().Format("15:04:05.000"), level, msg, keyvals)
	l.mu.Lock()
	defer l.mu.Unlock()
	const keep = 200
	if len(l.lines) == keep {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, line)
}

func (l *recentLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
