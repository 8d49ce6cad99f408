package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/smalldisk"
)

// fullDisk mounts a 256 KiB tmpfs on dir and fills it, or skips the test where mounting is not
// permitted. It returns the file filling it: removing it makes room again.
func fullDisk(t *testing.T, dir string) string {
	t.Helper()
	smalldisk.MountOn(t, dir, 256<<10)
	filler := filepath.Join(dir, "filler")
	smalldisk.Fill(t, filler)
	return filler
}

// TestPartitionsOfflineOnENOSPC creates a topic while the disk holding the partition logs is full:
// CreateTopics must answer KAFKA_STORAGE_ERROR naming the cause, Metadata must list the partitions
// offline and Produce must answer KAFKA_STORAGE_ERROR at once (it used to report success and list
// the partitions with a leader, and produces timed out). Once there is room the broker brings them
// online by itself, and a restart serves them.
func TestPartitionsOfflineOnENOSPC(t *testing.T) {
	const topic = "no-room"
	cfg := testConfig(t, t.TempDir())
	filler := fullDisk(t, filepath.Join(cfg.DataDir, "topics"))
	b := startBrokerWith(t, cfg)
	c := dial(t, b)

	created := roundTrip[*kmsg.CreateTopicsResponse](c, createTopicRequest(topic, 3, nil))
	if len(created.Topics) != 1 || created.Topics[0].ErrorCode != protocol.KafkaStorageError.Code ||
		!strings.Contains(fmt.Sprint(deref(created.Topics[0].ErrorMessage)), "no space left") {
		t.Fatalf("create on a full disk: %+v, want KAFKA_STORAGE_ERROR naming ENOSPC", created.Topics)
	}
	meta := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(9, false, topic)))
	if len(meta.Partitions) != 3 {
		t.Fatalf("metadata lists %d partitions, want 3", len(meta.Partitions))
	}
	for _, p := range meta.Partitions {
		if p.ErrorCode != protocol.KafkaStorageError.Code || p.Leader != -1 {
			t.Fatalf("partition %d on a full disk: error %d, leader %d; want KAFKA_STORAGE_ERROR, no leader", p.Partition, p.ErrorCode, p.Leader)
		}
	}
	if result := c.produce(topic, 0, recordBatch(batchTime, "lost?")); result.ErrorCode != protocol.KafkaStorageError.Code {
		t.Fatalf("produce to an offline partition: error %d, want KAFKA_STORAGE_ERROR", result.ErrorCode)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // the retry backoff starts at 0.5 s; this is a hang guard
	for {
		meta := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(9, false, topic)))
		online := len(meta.Partitions) == 3
		for _, p := range meta.Partitions {
			online = online && p.ErrorCode == 0 && p.Leader >= 0
		}
		if online {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions not online after the disk got room: %+v", meta.Partitions)
		}
		time.Sleep(50 * time.Millisecond) // polling the broker's answer: there is nothing to wait on
	}
	for partition := int32(0); partition < 3; partition++ {
		if offset := c.mustProduce(topic, partition, recordBatch(batchTime, "stored")); offset != 0 {
			t.Fatalf("first record of %s-%d at offset %d", topic, partition, offset)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.NewSet()
	c = dial(t, startBrokerWith(t, cfg))
	for partition := int32(0); partition < 3; partition++ {
		assertRecords(t, c.readAll(topic, partition), "stored")
	}
}
