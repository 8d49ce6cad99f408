package main

// Regression tests for replication stalls the chaos suite found (seed 1796175259477990328): a
// follower whose log ends before its leader's log start, and a leader whose log is damaged where a
// follower needs it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
)

// deleteRecords moves topic-partition's log start to offset (DeleteRecords, sent by kgo to the
// partition's leader), retrying while leadership settles.
func deleteRecords(t *testing.T, client *kgo.Client, topic string, partition int32, offset int64) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("DeleteRecords of %s-%d before %d", topic, partition, offset), func() bool {
		req := kmsg.NewPtrDeleteRecordsRequest()
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 5000
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, client)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return false
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode == 0 && p.LowWatermark == offset
	})
}

// produceToLeader produces value to topic-0 with acks=all through whichever node leads it,
// following leadership as it moves (produceAcked sticks to one node), and returns its offset.
func produceToLeader(t *testing.T, admin, client *kgo.Client, topic, value string) int64 {
	t.Helper()
	var offset int64
	eventually(t, 60*time.Second, "acknowledgement of "+value, func() bool {
		parts, ok := describeTopic(admin, topic)
		if !ok || parts[0].leader < 0 {
			return false
		}
		code, base := rawProduce(t, client, parts[0].leader, topic, 0, value)
		switch code {
		case 0:
			offset = base
			return true
		case -1, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code, kerr.NotLeaderForPartition.Code, kerr.NotEnoughReplicas.Code,
			kerr.LeaderNotAvailable.Code, kerr.RequestTimedOut.Code:
			return false
		}
		t.Fatalf("produce %s to node %d: error %d", value, parts[0].leader, code)
		return false
	})
	return offset
}

// otherReplica is a replica of info other than the given nodes.
func otherReplica(t *testing.T, info partitionInfo, not ...int32) int32 {
	t.Helper()
	for _, id := range info.replicas {
		if !slices.Contains(not, id) {
			return id
		}
	}
	t.Fatalf("no replica of %v outside %v", info.replicas, not)
	return -1
}

// awaitOutOfISR waits until node has left topic-0's ISR (an acks=all produce before that times out
// waiting for it).
func awaitOutOfISR(t *testing.T, client *kgo.Client, topic string, node int32) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("node %d out of the ISR of %s", node, topic), func() bool {
		parts, ok := describeTopic(client, topic)
		return ok && parts[0].leader >= 0 && !slices.Contains(parts[0].isr, node)
	})
}

// TestClusterFollowerBehindLeaderLogStart: a follower is down while its leader takes records and
// then deletes them (DeleteRecords) past the follower's log end. Back, the follower's fetches at its
// log end are out of range on the leader, for good: it used to stay out of the ISR forever. It must
// restart its log at the leader's log start, catch up and rejoin, with a replica identical to the
// others.
func TestClusterFollowerBehindLeaderLogStart(t *testing.T) {
	const topic = "behind-start"
	c := startCluster(t, 3, "--leader-rebalance-interval", "0")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, nil)
	awaitFullISR(t, admin, topic, 20*time.Second)
	client := clusterClient(t, c, kgo.DisableIdempotentWrite())
	info := leaderOf(t, admin, topic, 0)
	for i := range 20 {
		produceToLeader(t, admin, client, topic, fmt.Sprintf("before-%d", i))
	}
	away := c.Node(otherReplica(t, info, info.leader))
	away.Kill()
	awaitOutOfISR(t, admin, topic, away.ID)
	for i := range 40 {
		produceToLeader(t, admin, client, topic, fmt.Sprintf("while-away-%d", i))
	}
	deleteRecords(t, admin, topic, 0, 50) // the stopped follower's log ends at 20
	if err := away.Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, topic, 60*time.Second)
	for i := range 10 {
		produceToLeader(t, admin, client, topic, fmt.Sprintf("after-%d", i))
	}
	awaitFullISR(t, admin, topic, 30*time.Second)
	if resets, ok := scrapeMetric(t, away, "sluice_replication_log_resets_total"); !ok || resets < 1 {
		t.Errorf("node %d's sluice_replication_log_resets_total = %v (%v), want at least 1", away.ID, resets, ok)
	}
	assertReplicasIdentical(t, c, topic, 1)
}

// damageBatchHeader garbles, in place, the magic byte of the batch with base offset in a node's log
// of topic-0 (running or not, as bit rot would): reads of it fail with CORRUPT_MESSAGE.
func damageBatchHeader(t *testing.T, dataDir, topic string, offset int64) {
	t.Helper()
	dir := filepath.Join(dataDir, "topics", topic+"-0")
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("segment files in %s: %v %v", dir, logs, err)
	}
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		position := -1
		at := 0
		batch.Scan(data, func(h batch.Header, _ []byte) error {
			if h.BaseOffset == offset {
				position = at
			}
			at += h.Size()
			return nil
		})
		if position < 0 {
			continue
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt([]byte{0x7f}, int64(position)+16) // magic: no valid batch has it
		if err = errors.Join(err, f.Close()); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no batch at offset %d in %s", offset, dir)
}

// TestClusterDamagedLeaderLog: a leader's log is damaged (a garbled batch header, as a torn or
// bit-rotted sector leaves) at the very offset a returning follower must fetch. The follower got
// CORRUPT_MESSAGE for every fetch and never caught up. Two ways the damage is met:
//   - found-at-read: the leader meets it serving the follower. It hands leadership to the other
//     in-sync replica (resign-leader), truncates its log at the damage as a follower and fetches the
//     range again;
//   - found-at-restart: recovery finds it after a restart, while the replica follows; it truncates
//     there before fetching, so it never leads with the damage.
//
// Either way every replica ends in the ISR, identical, with every acknowledged record.
func TestClusterDamagedLeaderLog(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "found-at-read"
		if restart {
			name = "found-at-restart"
		}
		t.Run(name, func(t *testing.T) { testDamagedLeaderLog(t, restart) })
	}
}

func testDamagedLeaderLog(t *testing.T, restart bool) {
	topic := "damaged-leader-" + strings.TrimPrefix(t.Name(), "TestClusterDamagedLeaderLog/") // rawProduce caches topic ids by name
	c := startCluster(t, 3, "--leader-rebalance-interval", "1s")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, nil)
	awaitFullISR(t, admin, topic, 20*time.Second)
	client := clusterClient(t, c, kgo.DisableIdempotentWrite())
	info := leaderOf(t, admin, topic, 0)
	preferred := info.replicas[0]
	eventually(t, 30*time.Second, "the preferred replica leads", func() bool { return leaderOf(t, admin, topic, 0).leader == preferred })
	var acked []ackedRecord
	produce := func(prefix string, n int) {
		for i := range n {
			value := fmt.Sprintf("%s-%d", prefix, i)
			acked = append(acked, ackedRecord{0, produceToLeader(t, admin, client, topic, value), value})
		}
	}
	produce("before", 10)
	away := c.Node(otherReplica(t, info, preferred))
	away.Kill()
	awaitOutOfISR(t, admin, topic, away.ID)
	produce("while-away", 20) // offsets 10..29: the returning follower fetches from 10
	leader := c.Node(preferred)
	if restart {
		if err := leader.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		damageBatchHeader(t, leader.DataDir, topic, 10)
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the restarted replica leads again", func() bool {
			info := leaderOf(t, admin, topic, 0)
			return info.leader == preferred && len(info.isr) == 2
		})
	} else {
		damageBatchHeader(t, leader.DataDir, topic, 10)
	}
	if err := away.Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, topic, 60*time.Second)
	if !restart {
		if resignations, ok := scrapeMetric(t, leader, "sluice_replication_leader_resignations_total"); !ok || resignations < 1 {
			t.Errorf("node %d's sluice_replication_leader_resignations_total = %v (%v), want at least 1", leader.ID, resignations, ok)
		}
	}
	produce("after", 10)
	awaitFullISR(t, admin, topic, 30*time.Second)
	read := readEverything(t, c, topic, 1)
	checkHistory(t, read, acked, func(string) bool { return false })
	assertReplicasIdentical(t, c, topic, 1)
}
