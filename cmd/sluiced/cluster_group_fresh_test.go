package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinatorAt asks one node which node coordinates group.
func coordinatorAt(client *kgo.Client, node int32, group string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := client.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return -1, err
	}
	found := resp.(*kmsg.FindCoordinatorResponse)
	if len(found.Coordinators) != 1 || found.Coordinators[0].ErrorCode != 0 {
		return -1, fmt.Errorf("find coordinator at node %d: %+v", node, found)
	}
	return found.Coordinators[0].NodeID, nil
}

// simpleCommitAt commits offset for group's topic-0 at one node (generation -1, no member: a group
// without members) and returns the error code.
func simpleCommitAt(client *kgo.Client, node int32, group, topic string, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := client.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return -1
	}
	return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// TestClusterResumedCoordinatorServesNoStaleOffsets is the regression test for committed offsets
// read backwards (chaos seed 1796175259477990328): a group coordinator is paused (SIGSTOP) after a
// commit, another node takes the group over and a newer commit lands there. An OffsetFetch waiting
// in the paused node's socket is the first thing it serves when it resumes, before its Raft copy
// catches up: it used to answer the old offset, from its stale copy, as if it still coordinated the
// group. It must answer the new offset or refuse (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE).
//
// On the old code this fails only when the fetch wins the race against the Raft entries that also
// wait in the resumed node's sockets (about half the runs here); coordinator's
// TestReadBarrierRefusesAStaleNode holds a node's Raft copy back deterministically.
func TestClusterResumedCoordinatorServesNoStaleOffsets(t *testing.T) {
	const topic, group = "fresh-offsets", "fresh-group"
	c := startCluster(t, 3, "--leader-rebalance-interval", "0")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, nil)
	awaitFullISR(t, admin, topic, 20*time.Second)
	old := coordinatorOf(t, admin, group)
	eventually(t, 30*time.Second, "the first commit", func() bool { return simpleCommitAt(admin, old, group, topic, 10) == 0 })

	stale := c.Node(old)
	stale.Pause()
	defer stale.Resume()
	var next int32 = -1
	eventually(t, 30*time.Second, "another node coordinating the group", func() bool {
		for _, n := range c.Nodes {
			if n.ID == old {
				continue
			}
			if coordinator, err := coordinatorAt(admin, n.ID, group); err == nil && coordinator == n.ID {
				next = n.ID
				return true
			}
		}
		return false
	})
	eventually(t, 30*time.Second, "the newer commit", func() bool { return simpleCommitAt(admin, next, group, topic, 20) == 0 })

	// The fetch waits in the paused node's socket (the kernel accepts the connection).
	conn, err := net.DialTimeout("tcp", stale.KafkaAddress(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(5) // a non-flexible response header: correlation id only
	fetch.Group = group
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = topic, []int32{0}
	fetch.Topics = append(fetch.Topics, ft)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("stale-check")).AppendRequest(nil, fetch, 7)
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	stale.Resume()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	reader := bufio.NewReader(conn)
	var size [4]byte
	if _, err := io.ReadFull(reader, size[:]); err != nil {
		t.Fatalf("no answer from the resumed node: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(reader, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.SetVersion(5)
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Logf("the resumed node refused: error %d", resp.ErrorCode)
		return
	}
	got := resp.Topics[0].Partitions[0].Offset
	if got != 20 {
		t.Fatalf("the resumed node answered committed offset %d; the group committed 20 while it was paused", got)
	}
}
