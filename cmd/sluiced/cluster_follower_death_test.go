package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClusterKilledFollowerLeavesISRWithoutLagTime: when a follower dies (kill -9), its fetch
// connection to the leader closes, and the leader takes it out of the ISR after the disconnect
// grace (1 s) instead of the replica lag time, so acks=all stalls for about a second, not 30. The
// lag time is set far above the waits here: without the disconnect rule the test fails.
func TestClusterKilledFollowerLeavesISRWithoutLagTime(t *testing.T) {
	const topic = "follower-death"
	c := startCluster(t, 3, "--replica-lag-time-max", "60s")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)
	info := leaderOf(t, admin, topic, 0)
	victim := followersOf(info)[0]
	load := startLoad(t, c, "idem", topic)
	eventually(t, 30*time.Second, "records acknowledged", func() bool { return load.ackedCount() > 500 })

	c.Node(victim).Kill()
	killedAt := time.Now()
	atKill := load.ackedCount()
	eventually(t, 20*time.Second, "the dead follower leaves the ISR", func() bool {
		parts, ok := describeTopic(admin, topic)
		return ok && len(parts[0].isr) == 2 && !slices.Contains(parts[0].isr, victim)
	})
	eventually(t, 20*time.Second, "acks=all continues on two replicas", func() bool { return load.ackedCount() > atKill+500 })
	t.Logf("follower %d out of the ISR and acks=all flowing %v after kill -9", victim, time.Since(killedAt).Round(time.Millisecond))

	if err := c.Node(victim).Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, topic, 60*time.Second)
	acked := load.finish()
	read := readEverything(t, c, topic, 1)
	checkHistory(t, read, acked, func(v string) bool { return strings.HasPrefix(v, "idem-") })
	assertReplicasIdentical(t, c, topic, 1)
}
