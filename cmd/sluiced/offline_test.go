package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol/wire"
)

// rawConn is one connection speaking exact request versions through protocol/wire.
type rawConn struct {
	t           testing.TB
	conn        net.Conn
	correlation int32
}

func dialRaw(t testing.TB, address string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn}
}

func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.correlation++
	// A guard against a broker that never answers, not a timing assertion.
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := wire.WriteFrame(c.conn, wire.EncodeRequest(c.correlation, "offline-test", req)); err != nil {
		c.t.Fatal(err)
	}
	frame, err := wire.ReadFrame(c.conn, 64<<20)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := wire.DecodeResponse(frame, req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

func (c *rawConn) createTopic(name string, partitions int32) kmsg.CreateTopicsResponseTopic {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	req.TimeoutMillis = 30_000
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, topic)
	return c.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics[0]
}

func (c *rawConn) metadata(topic string) kmsg.MetadataResponseTopic {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	return c.roundTrip(req).(*kmsg.MetadataResponse).Topics[0]
}

func (c *rawConn) produce(topic string, partition int32, value string) kmsg.ProduceResponseTopicPartition {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	var builder batch.Builder
	builder.Reset(time.Now())
	builder.Add(batch.Record{Value: []byte(value)})
	rp.Partition, rp.Records = partition, builder.Finish()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// setOpenFileLimit sets the soft RLIMIT_NOFILE of process pid and returns the previous limits.
func setOpenFileLimit(t testing.TB, pid int, soft uint64) unix.Rlimit {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatalf("read RLIMIT_NOFILE of %d: %v", pid, err)
	}
	limit := unix.Rlimit{Cur: soft, Max: old.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &limit, nil); err != nil {
		t.Fatalf("set RLIMIT_NOFILE of %d: %v", pid, err)
	}
	return old
}

func openFiles(t testing.TB, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

const kafkaStorageError = 56

// TestPartitionsOfflineOnEMFILE runs sluiced with RLIMIT_NOFILE lowered so that CreateTopics cannot
// open every partition's log (real EMFILE). CreateTopics must say so (KAFKA_STORAGE_ERROR), Metadata
// must list those partitions offline and Produce must answer KAFKA_STORAGE_ERROR at once; once the
// limit is back the broker brings them online by itself; and a kill -9 while partitions are offline
// must not stop the next start.
func TestPartitionsOfflineOnEMFILE(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	pid := d.cmd.Process.Pid
	conn := dialRaw(t, d.kafka) // before the limit drops: no accept may need a descriptor

	offlineAfterCreate := func(topic string) []int32 {
		t.Helper()
		original := setOpenFileLimit(t, pid, uint64(openFiles(t, pid)+12))
		created := conn.createTopic(topic, 24)
		if created.ErrorCode != kafkaStorageError || created.ErrorMessage == nil || !strings.Contains(*created.ErrorMessage, "too many open files") {
			t.Fatalf("create %s with a low descriptor limit: error %d (%v), want KAFKA_STORAGE_ERROR naming EMFILE",
				topic, created.ErrorCode, derefString(created.ErrorMessage))
		}
		meta := conn.metadata(topic)
		var offline []int32
		for _, p := range meta.Partitions {
			switch p.ErrorCode {
			case 0:
			case kafkaStorageError:
				if p.Leader != -1 || len(p.OfflineReplicas) != 1 {
					t.Fatalf("offline %s-%d listed with leader %d, offline replicas %v", topic, p.Partition, p.Leader, p.OfflineReplicas)
				}
				offline = append(offline, p.Partition)
			default:
				t.Fatalf("metadata %s-%d: error %d", topic, p.Partition, p.ErrorCode)
			}
		}
		if len(offline) == 0 || len(offline) == len(meta.Partitions) {
			t.Fatalf("%d of %d partitions offline; the limit should leave some but not all of them offline", len(offline), len(meta.Partitions))
		}
		if result := conn.produce(topic, offline[0], "lost?"); result.ErrorCode != kafkaStorageError {
			t.Fatalf("produce to offline %s-%d: error %d, want KAFKA_STORAGE_ERROR", topic, offline[0], result.ErrorCode)
		}
		if !strings.Contains(d.logs(), "partition offline") {
			t.Fatalf("no log line for the offline partitions:\n%s", d.logs())
		}
		setOpenFileLimit(t, pid, original.Cur)
		t.Logf("%s: partitions %v offline after create: %s", topic, offline, derefString(created.ErrorMessage))
		return offline
	}

	// Phase 1: the limit comes back and the broker retries on its own.
	offline := offlineAfterCreate("emfile")
	awaitOnline(t, conn, "emfile")
	for _, partition := range offline {
		if result := conn.produce("emfile", partition, "stored"); result.ErrorCode != 0 {
			t.Fatalf("produce to emfile-%d once online: error %d", partition, result.ErrorCode)
		}
	}
	if !strings.Contains(d.logs(), "partition back online") {
		t.Fatalf("no log line for partitions coming back:\n%s", d.logs())
	}

	// Phase 2: the broker dies while partitions are offline, with whatever half-made directories
	// EMFILE left; the next start serves everything.
	offlineAfterCreate("emfile-crash")
	d.kill()
	restarted := startDaemon(t, dataDir)
	conn = dialRaw(t, restarted.kafka)
	for _, topic := range []string{"emfile", "emfile-crash"} {
		awaitOnline(t, conn, topic)
		for partition := int32(0); partition < 24; partition++ {
			if result := conn.produce(topic, partition, "after restart"); result.ErrorCode != 0 {
				t.Fatalf("produce to %s-%d after restart: error %d", topic, partition, result.ErrorCode)
			}
		}
	}
	for _, partition := range offline {
		meta := conn.fetchEnd("emfile", partition)
		if meta != 2 {
			t.Fatalf("emfile-%d holds %d records after restart, want 2", partition, meta)
		}
	}
}

// awaitOnline polls Metadata until every partition of topic is served.
func awaitOnline(t testing.TB, conn *rawConn, topic string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // the retry backoff grows to 30 s; this is a hang guard
	for {
		meta := conn.metadata(topic)
		online := meta.ErrorCode == 0 && len(meta.Partitions) > 0
		for _, p := range meta.Partitions {
			online = online && p.ErrorCode == 0 && p.Leader >= 0
		}
		if online {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not online: %+v", topic, meta)
		}
		time.Sleep(50 * time.Millisecond) // polling the broker's answer: there is nothing to wait on
	}
}

// fetchEnd returns a partition's log end offset (ListOffsets latest).
func (c *rawConn) fetchEnd(topic string, partition int32) int64 {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(4)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	result := c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if result.ErrorCode != 0 {
		c.t.Fatalf("list offsets %s-%d: error %d", topic, partition, result.ErrorCode)
	}
	return result.Offset
}

func derefString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
