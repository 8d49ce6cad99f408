package coordinator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/smalldisk"
)

// TestClusterBrokerThatCannotApplyIsFenced: node 2's Raft store sits on a small filesystem that
// fills up while the controller keeps committing changes, so node 2 cannot store or apply them. It
// counts its own session as lapsed, and it must also stop heartbeating, so that the controller
// fences it (and would move its leaderships) instead of counting it alive. Once there is room
// again, it catches up, heartbeats and is unfenced. Found by the chaos suite's disk-full fault: the
// filled node kept heartbeating, was never fenced, and refused produce for the partitions it led
// for as long as its disk stayed full (up to 19 s).
func TestClusterBrokerThatCannotApplyIsFenced(t *testing.T) {
	disk := smalldisk.Mount(t, 8<<20)
	tc := startClusterWith(t, 3, func(c *Config) {
		if c.NodeID == 2 {
			c.DataDir = filepath.Join(disk, "node2")
		}
	})
	registerWithSessions(t, tc, 3)
	observer := tc.node(1)
	awaitCondition(t, "node 2 heartbeating", func() bool { return tc.node(2).session.renewed.Load() != 0 })

	filler := filepath.Join(disk, "filler")
	smalldisk.Fill(t, filler)
	// Keep the controller committing, through node 3 (node 2 cannot finish a call: it waits to
	// apply the change itself).
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = tc.node(3).CreateTopic(ctx, fmt.Sprintf("t%d", i), 1, 1, nil, false)
			cancel()
		}
	}()
	defer func() { close(stop); <-done }()

	awaitMetadata(t, observer, "node 2 fenced", func(m *Metadata) bool { return m.Brokers[2].Fenced })
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	awaitMetadata(t, observer, "node 2 unfenced once it has room", func(m *Metadata) bool { return !m.Brokers[2].Fenced })
}
