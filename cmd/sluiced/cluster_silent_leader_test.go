package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterSilentLeaderIsDemoted: a leader that stops answering its followers while it keeps
// its controller session (the session timeout here is 60 s, so it is never fenced) loses its
// leaderships once both followers report it (replication.Config.LeaderUnreachableAfter), and
// acks=all resumes on them. Here the leader is SIGSTOPped, which silences its replication links;
// the chaos suite cuts only those links through its proxies. Nothing acknowledged is lost, and the
// old leader rejoins as a follower.
func TestClusterSilentLeaderIsDemoted(t *testing.T) {
	const topic = "silent-leader"
	c := startCluster(t, 3, "--broker-session-timeout", "60s", "--replica-leader-unreachable", "1s")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)
	old := leaderOf(t, admin, topic, 0).leader
	// The producers' requests to the stopped leader get no answer at all: the kernel still accepts
	// connections for the stopped process, so every request and every connection attempt to it
	// waits out its whole deadline (kgo's default overhead is 10 s). kgo also keeps retrying the
	// stopped broker until a metadata refresh names the new leader, and a refresh can itself pick
	// the stopped broker. Short deadlines and a metadata refresh every second, as the chaos suite's
	// clients use, bound that to a few seconds; kgo's defaults take tens of seconds.
	load := startLoad(t, c, "idem", topic, kgo.RequestTimeoutOverhead(time.Second), kgo.ProduceRequestTimeout(1500*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	defer func() {
		if t.Failed() {
			t.Logf("producer errors: %s", load.errorSummary())
		}
	}()
	eventually(t, 30*time.Second, "records acknowledged", func() bool { return load.ackedCount() > 500 })

	c.Node(old).Pause()
	pausedAt := time.Now()
	atPause := load.ackedCount()
	eventually(t, 25*time.Second, "leadership moves off the silent leader", func() bool {
		parts, ok := describeTopic(admin, topic)
		return ok && parts[0].leader >= 0 && parts[0].leader != old && !slices.Contains(parts[0].isr, old)
	})
	eventually(t, 25*time.Second, "acks=all continues on the followers", func() bool { return load.ackedCount() > atPause+500 })
	t.Logf("leadership moved off node %d and acks=all flowing %v after SIGSTOP", old, time.Since(pausedAt).Round(time.Millisecond))

	c.Node(old).Resume()
	awaitFullISR(t, admin, topic, 60*time.Second)
	acked := load.finish()
	read := readEverything(t, c, topic, 1)
	checkHistory(t, read, acked, func(v string) bool { return strings.HasPrefix(v, "idem-") })
	assertReplicasIdentical(t, c, topic, 1)
}
