package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupRebalanceTenMembers starts 10 franz-go members of one group on a 64-partition topic at
// once and measures how long after the last member started every partition is assigned to exactly
// one member; then an 11th member joins the stable group and the same is measured. The figures are
// logged, not asserted (timing depends on the machine); the test fails only if assignment never
// settles.
func TestGroupRebalanceTenMembers(t *testing.T) {
	b := startBroker(t, func(cfg *Config) { cfg.Log.SegmentBytes = 1 << 20 }) // 64 preallocated segments
	dial(t, b).createTopic("wide", 64, nil)
	ctx := groupTestContext(t)

	var mu sync.Mutex
	owned := map[int]map[int32]bool{} // member -> partitions
	changed := make(chan struct{}, 1)
	settledAt := func() bool { // every partition owned by exactly one member
		mu.Lock()
		defer mu.Unlock()
		count := map[int32]int{}
		for _, partitions := range owned {
			for p := range partitions {
				count[p]++
			}
		}
		if len(count) != 64 {
			return false
		}
		for _, n := range count {
			if n != 1 {
				return false
			}
		}
		return true
	}
	start := func(member int) {
		opts := []kgo.Opt{
			kgo.ConsumerGroup("ten"), kgo.ConsumeTopics("wide"), kgo.Balancers(kgo.RangeBalancer()),
			kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
				mu.Lock()
				if owned[member] == nil {
					owned[member] = map[int32]bool{}
				}
				for _, p := range assigned["wide"] {
					owned[member][p] = true
				}
				mu.Unlock()
				select {
				case changed <- struct{}{}:
				default:
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
				mu.Lock()
				for _, p := range revoked["wide"] {
					delete(owned[member], p)
				}
				mu.Unlock()
			}),
		}
		client := franzClient(t, b, opts...)
		go func() {
			for ctx.Err() == nil {
				client.PollFetches(ctx)
			}
		}()
	}
	await := func(what string, since time.Time) {
		for !settledAt() {
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("%s: assignment never settled", what)
			}
		}
		t.Logf("%s: every partition assigned once %v after the last member started", what, time.Since(since).Round(time.Millisecond))
	}
	var wg sync.WaitGroup
	for member := range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); start(member) }()
	}
	wg.Wait()
	await("10 members, 64 partitions, new group", time.Now())
	joined := time.Now()
	start(10)
	for {
		mu.Lock()
		got := len(owned[10])
		mu.Unlock()
		if got > 0 && settledAt() {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("11th member never got partitions")
		}
	}
	t.Logf("%s", fmt.Sprintf("11th member joining a stable group: settled %v after it started", time.Since(joined).Round(time.Millisecond)))
}
