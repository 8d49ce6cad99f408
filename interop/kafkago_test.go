package interop

// kafka-go (github.com/segmentio/kafka-go) against a real sluiced process (issue 17): Client.Fetch
// (a sessionless Fetch: session id -1, epoch -1), Client.DeleteGroups on a group its last member
// left without committing, and Client.CreateTopics with manual replica assignments.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/sluice-mq/sluice/localcluster"
)

// sluiced is the binary built once for the tests that run real processes.
var sluiced struct {
	once   sync.Once
	dir    string
	binary string
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sluiced.dir != "" {
		os.RemoveAll(sluiced.dir)
	}
	os.Exit(code)
}

// lockedBuffer collects a process's log lines for a failure report.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// startSluiced runs one sluiced process (node 1) on ephemeral ports and returns its Kafka address.
func startSluiced(t *testing.T) string {
	t.Helper()
	sluiced.once.Do(func() {
		if sluiced.dir, sluiced.err = os.MkdirTemp("", "interop-sluiced-"); sluiced.err == nil {
			sluiced.binary, sluiced.err = localcluster.Build("..", sluiced.dir)
		}
	})
	if sluiced.err != nil {
		t.Fatal(sluiced.err)
	}
	logs := &lockedBuffer{}
	c, err := localcluster.Start(localcluster.Config{Binary: sluiced.binary, Dir: t.TempDir(), Nodes: 1, Logs: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("sluiced log:\n%s", logs.buf.String())
			logs.mu.Unlock()
		}
	})
	return c.Bootstrap()[0]
}

func kafkaGoClient(address string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(address), Timeout: 30 * time.Second}
}

func kafkaGoCreateTopic(ctx context.Context, t *testing.T, client *kafka.Client, topic kafka.TopicConfig) error {
	t.Helper()
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{topic}})
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic.Topic, err)
	}
	return resp.Errors[topic.Topic]
}

func TestKafkaGoClientFetch(t *testing.T) {
	address := startSluiced(t)
	client := kafkaGoClient(address)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := kafkaGoCreateTopic(ctx, t, client, kafka.TopicConfig{Topic: "fetched", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	values := []string{"one", "two", "three"}
	var records []kafka.Record
	for _, v := range values {
		records = append(records, kafka.Record{Value: kafka.NewBytes([]byte(v))})
	}
	produced, err := client.Produce(ctx, &kafka.ProduceRequest{Topic: "fetched", RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(records...)})
	if err != nil || produced.Error != nil {
		t.Fatalf("Produce: %v %v", err, produced)
	}

	for _, offset := range []int64{0, kafka.FirstOffset, 1} {
		resp, err := client.Fetch(ctx, &kafka.FetchRequest{Topic: "fetched", Offset: offset, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("Fetch at %d: %v", offset, err)
		}
		if resp.Error != nil || resp.HighWatermark != 3 {
			t.Fatalf("Fetch at %d: error %v, high watermark %d", offset, resp.Error, resp.HighWatermark)
		}
		var got []string
		for {
			r, err := resp.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Fetch at %d: read record: %v", offset, err)
			}
			value, err := io.ReadAll(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if r.Offset >= max(offset, 0) {
				got = append(got, string(value))
			}
		}
		want := values[max(offset, 0):]
		if len(got) != len(want) {
			t.Fatalf("Fetch at %d: %q, want %q", offset, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("Fetch at %d: %q, want %q", offset, got, want)
			}
		}
	}
}

func TestKafkaGoDeleteGroups(t *testing.T) {
	address := startSluiced(t)
	client := kafkaGoClient(address)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := kafkaGoCreateTopic(ctx, t, client, kafka.TopicConfig{Topic: "grouped", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	produced, err := client.Produce(ctx, &kafka.ProduceRequest{Topic: "grouped", RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes([]byte("only"))})})
	if err != nil || produced.Error != nil {
		t.Fatalf("Produce: %v %v", err, produced)
	}

	// A member joins, reads without committing, and leaves: the group is left Empty, with no
	// offsets. Kafka keeps it, so DeleteGroups deletes it.
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{address}, GroupID: "emptied", Topic: "grouped",
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	message, err := reader.FetchMessage(ctx)
	if err != nil {
		reader.Close()
		t.Fatalf("FetchMessage: %v", err)
	}
	if string(message.Value) != "only" {
		t.Fatalf("read %q", message.Value)
	}
	if err := reader.Close(); err != nil { // LeaveGroup
		t.Fatalf("close reader: %v", err)
	}

	groups, err := client.ListGroups(ctx, &kafka.ListGroupsRequest{})
	if err != nil || groups.Error != nil {
		t.Fatalf("ListGroups: %v %v", err, groups)
	}
	listed := false
	for _, g := range groups.Groups {
		listed = listed || g.GroupID == "emptied"
	}
	if !listed {
		t.Fatalf("ListGroups after the member left: %+v, want the emptied group", groups.Groups)
	}
	deleted, err := client.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{"emptied"}})
	if err != nil {
		t.Fatalf("DeleteGroups: %v", err)
	}
	if err := deleted.Errors["emptied"]; err != nil {
		t.Fatalf("DeleteGroups of the emptied group: %v", err)
	}
	again, err := client.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{"emptied"}})
	if err != nil {
		t.Fatalf("DeleteGroups again: %v", err)
	}
	if err := again.Errors["emptied"]; !errors.Is(err, kafka.GroupIdNotFound) {
		t.Fatalf("DeleteGroups of a deleted group: %v, want GROUP_ID_NOT_FOUND", err)
	}
}

func TestKafkaGoCreateTopicsWithAssignments(t *testing.T) {
	address := startSluiced(t)
	client := kafkaGoClient(address)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	assigned := kafka.TopicConfig{Topic: "assigned", NumPartitions: -1, ReplicationFactor: -1,
		ReplicaAssignments: []kafka.ReplicaAssignment{{Partition: 0, Replicas: []int{1}}, {Partition: 1, Replicas: []int{1}}}}
	if err := kafkaGoCreateTopic(ctx, t, client, assigned); err != nil {
		t.Fatalf("CreateTopics with assignments: %v", err)
	}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"assigned"}})
	if err != nil || len(meta.Topics) != 1 || meta.Topics[0].Error != nil || len(meta.Topics[0].Partitions) != 2 {
		t.Fatalf("Metadata: %v %+v", err, meta)
	}
	for _, p := range meta.Topics[0].Partitions {
		if p.Leader.ID != 1 || len(p.Replicas) != 1 || p.Replicas[0].ID != 1 {
			t.Fatalf("partition %d: leader %d, replicas %+v", p.ID, p.Leader.ID, p.Replicas)
		}
	}
	unknown := kafka.TopicConfig{Topic: "misassigned", NumPartitions: -1, ReplicationFactor: -1,
		ReplicaAssignments: []kafka.ReplicaAssignment{{Partition: 0, Replicas: []int{7}}}}
	if err := kafkaGoCreateTopic(ctx, t, client, unknown); !errors.Is(err, kafka.InvalidReplicaAssignment) {
		t.Fatalf("CreateTopics naming an unknown broker: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
}
