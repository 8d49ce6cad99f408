package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/protocol"
)

// TestAdminAndTypedErrors walks the admin calls and checks the error types they return.
func TestAdminAndTypedErrors(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	admin := client.NewAdmin(c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if err := admin.CreateTopics(ctx, client.TopicSpec{Name: "a", Partitions: 3, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "3600000"}},
		client.TopicSpec{Name: "b", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	err := admin.CreateTopics(ctx, client.TopicSpec{Name: "a", Partitions: 3, ReplicationFactor: 1})
	var kafkaErr *client.KafkaError
	if !errors.As(err, &kafkaErr) || kafkaErr.Code != protocol.TopicAlreadyExists.Code || kafkaErr.Topic != "a" || kafkaErr.Retriable {
		t.Fatalf("creating an existing topic: %v (%+v)", err, kafkaErr)
	}
	if !errors.Is(err, protocol.TopicAlreadyExists) || client.IsRetriable(err) {
		t.Fatalf("errors.Is(TopicAlreadyExists) / IsRetriable wrong for %v", err)
	}

	topics, err := admin.ListTopics(ctx, false)
	if err != nil || !slices.Contains(topics, "a") || !slices.Contains(topics, "b") {
		t.Fatalf("list topics: %v, %v", topics, err)
	}
	described, err := admin.DescribeTopics(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(described) != 1 || len(described[0].Partitions) != 3 || described[0].Configs["retention.ms"] != "3600000" || described[0].Partitions[2].Leader < 0 {
		t.Fatalf("describe a: %+v", described)
	}
	if err := admin.AlterTopicConfigs(ctx, "a", client.SetConfig("retention.ms", "7200000")); err != nil {
		t.Fatal(err)
	}
	if described, err = admin.DescribeTopics(ctx, "a"); err != nil || described[0].Configs["retention.ms"] != "7200000" {
		t.Fatalf("after alter: %v %v", described[0].Configs["retention.ms"], err)
	}
	if _, err := admin.DescribeTopics(ctx, "missing"); !errors.Is(err, client.ErrUnknownTopic) {
		t.Fatalf("describe missing topic: %v", err)
	}

	p := newProducer(t, c)
	for i := 0; i < 5; i++ {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "a", Partition: 1, Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "missing"}); !errors.Is(err, client.ErrUnknownTopic) ||
		!errors.As(err, &kafkaErr) || kafkaErr.Code != protocol.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to a missing topic: %v", err)
	}
	ends, err := admin.ListOffsets(ctx, "a", client.AtEnd())
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, end := range ends {
		total += end.Offset
	}
	starts, err := admin.ListOffsets(ctx, "a", client.AtStart(), 0, 1, 2)
	if err != nil || total != 5 || len(ends) != 3 || starts[1].Offset != 0 {
		t.Fatalf("list offsets: ends %v starts %v: %v", ends, starts, err)
	}

	if err := admin.DeleteTopics(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if topics, err = admin.ListTopics(ctx, false); err != nil || slices.Contains(topics, "b") {
		t.Fatalf("after delete: %v, %v", topics, err)
	}
	if err := admin.DeleteTopics(ctx, "b"); !errors.Is(err, protocol.UnknownTopicOrPartition) {
		t.Fatalf("deleting a missing topic: %v", err)
	}
}

// TestProduceAcksNone: with acks=0 records are reported once written, with offset -1.
func TestProduceAcksNone(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "noacks", 2)
	p := newProducer(t, c, client.WithAcks(client.AcksNone))
	where := produceKeyed(t, p, "noacks", 10_000, 100)
	for i, w := range where {
		if w.offset != -1 {
			t.Fatalf("record %d has offset %d with acks=0", i, w.offset)
		}
	}
	consumer := newConsumer(t, c)
	assignAll(t, consumer, "noacks", 2, client.AtStart())
	pollN(t, consumer, 10_000)
}
