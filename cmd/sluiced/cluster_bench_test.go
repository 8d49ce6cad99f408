package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkClusterFailover measures a failover as a producer sees it: from kill -9 of a partition's
// leader to the first acks=all record acknowledged after the kill (by the new leader), once per
// iteration. The killed node is restarted and back in the ISR before the next. Run it with
// `make bench-failover` (20 kills); it reports the median and the longest failover.
//
// Each kill is logged with whether the victim was also the Raft controller (those failovers include
// a controller election), and the longest of those is reported on its own.
func BenchmarkClusterFailover(b *testing.B) {
	const topic = "failover"
	c := startCluster(b, 3)
	admin := clusterClient(b, c)
	createReplicatedTopic(b, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(b, admin, topic, 60*time.Second)
	producer := clusterClient(b, c, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(50*time.Millisecond))

	// One record in flight at a time, so that an acknowledgement's time is close to when the
	// new leader could first take it.
	var mu sync.Mutex
	var lastAck time.Time
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("tick")}).FirstErr(); err == nil {
				mu.Lock()
				lastAck = time.Now()
				mu.Unlock()
			}
		}
	}()
	ackedSince := func(t time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		return lastAck.After(t)
	}
	var failovers, controllerKills []time.Duration
	b.ResetTimer()
	for i := range b.N {
		info := leaderOf(b, admin, topic, 0)
		controller := controllerOf(b, admin)
		eventually(b, 30*time.Second, "acknowledgements before the kill", func() bool { return ackedSince(time.Now().Add(-100 * time.Millisecond)) })
		killed := time.Now()
		c.Node(info.leader).Kill()
		eventually(b, 60*time.Second, "an acknowledgement after the kill", func() bool { return ackedSince(killed) })
		mu.Lock()
		failover := lastAck.Sub(killed)
		mu.Unlock()
		failovers = append(failovers, failover)
		if info.leader == controller {
			controllerKills = append(controllerKills, failover)
		}
		b.Logf("kill %d: node %d (controller: %v) failover %v", i+1, info.leader, info.leader == controller, failover.Round(time.Millisecond))
		if err := c.Node(info.leader).Start(); err != nil {
			b.Fatal(err)
		}
		awaitFullISR(b, admin, topic, 60*time.Second)
	}
	b.StopTimer()
	cancel()
	<-done
	slices.Sort(failovers)
	b.ReportMetric(float64(failovers[len(failovers)/2].Milliseconds()), "p50-failover-ms")
	b.ReportMetric(float64(failovers[len(failovers)-1].Milliseconds()), "max-failover-ms")
	b.ReportMetric(float64(len(controllerKills)), "controller-kills")
	if len(controllerKills) > 0 {
		slices.Sort(controllerKills)
		b.ReportMetric(float64(controllerKills[len(controllerKills)-1].Milliseconds()), "max-controller-failover-ms")
	}
	b.ReportMetric(0, "ns/op") // the wall time of an iteration includes the restart: not a figure
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
