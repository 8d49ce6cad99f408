package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/client"
)

// exampleBroker starts an in-process broker for an example; real code points WithSeedBrokers at
// a running sluiced.
func exampleBroker() (address string, stop func()) {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		panic(err)
	}
	cfg := broker.DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.RaftListen = dir, "127.0.0.1:0", "127.0.0.1:0"
	cfg.Metrics = metrics.NewSet()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	b, err := broker.Start(context.Background(), cfg)
	if err != nil {
		panic(err)
	}
	return b.Addr().String(), func() {
		b.Close(context.Background())
		os.RemoveAll(dir)
	}
}

// Producing asynchronously with callbacks, then synchronously; Close flushes.
func ExampleProducer() {
	address, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(client.WithSeedBrokers(address))
	defer c.Close()
	client.NewAdmin(c).CreateTopics(ctx, client.TopicSpec{Name: "orders", Partitions: 4, ReplicationFactor: 1})

	p, err := client.NewProducer(ctx, c, client.WithAcks(client.AcksAll), client.WithLinger(5*time.Millisecond),
		client.WithCompression(client.CompressionZstd))
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 3; i++ {
		record := &client.Record{Topic: "orders", Key: []byte("customer-7"), Value: fmt.Appendf(nil, "order %d", i)}
		p.Produce(ctx, record, func(r *client.Record, err error) {
			if err != nil {
				fmt.Println("not delivered:", err)
				return
			}
			fmt.Printf("%s -> partition %d offset %d\n", r.Value, r.Partition, r.Offset)
		})
	}
	p.Flush(ctx)
	if err := p.ProduceSync(ctx, &client.Record{Topic: "orders", Key: []byte("customer-7"), Value: []byte("order 3")}); err != nil {
		fmt.Println(err)
	}
	fmt.Println(p.Close(ctx))
	// Output:
	// order 0 -> partition 3 offset 0
	// order 1 -> partition 3 offset 1
	// order 2 -> partition 3 offset 2
	// <nil>
}

// Reading two partitions from the start with Poll.
func ExampleConsumer() {
	address, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(client.WithSeedBrokers(address))
	defer c.Close()
	client.NewAdmin(c).CreateTopics(ctx, client.TopicSpec{Name: "events", Partitions: 2, ReplicationFactor: 1})
	p, _ := client.NewProducer(ctx, c, client.WithPartitioner(client.ManualPartitioner()))
	for i := 0; i < 4; i++ {
		p.ProduceSync(ctx, &client.Record{Topic: "events", Partition: int32(i % 2), Value: fmt.Appendf(nil, "event %d", i)})
	}
	p.Close(ctx)

	consumer, _ := client.NewConsumer(c, client.WithConsumerBufferBytes(8<<20))
	defer consumer.Close()
	consumer.Assign(ctx,
		client.Assignment{Topic: "events", Partition: 0, Offset: client.AtStart()},
		client.Assignment{Topic: "events", Partition: 1, Offset: client.AtOffset(1)})
	for read := 0; read < 3; {
		fetches, err := consumer.Poll(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, f := range fetches {
			for _, r := range f.Records {
				fmt.Printf("partition %d offset %d: %s\n", r.Partition, r.Offset, r.Value)
				read++
			}
		}
	}
	// Unordered output:
	// partition 0 offset 0: event 0
	// partition 0 offset 1: event 2
	// partition 1 offset 1: event 3
}

// Creating, describing, configuring and deleting a topic.
func ExampleAdmin() {
	address, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(client.WithSeedBrokers(address))
	defer c.Close()
	admin := client.NewAdmin(c)

	err := admin.CreateTopics(ctx, client.TopicSpec{Name: "logs", Partitions: 3, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "86400000"}})
	fmt.Println("create:", err)
	err = admin.CreateTopics(ctx, client.TopicSpec{Name: "logs", Partitions: 3, ReplicationFactor: 1})
	var kafkaErr *client.KafkaError
	if errors.As(err, &kafkaErr) {
		fmt.Println("create again:", kafkaErr.Name, "retriable:", kafkaErr.Retriable)
	}
	fmt.Println("alter:", admin.AlterTopicConfigs(ctx, "logs", client.SetConfig("retention.ms", "3600000")))
	topics, _ := admin.DescribeTopics(ctx, "logs")
	fmt.Println("partitions:", len(topics[0].Partitions), "retention.ms:", topics[0].Configs["retention.ms"])
	ends, _ := admin.ListOffsets(ctx, "logs", client.AtEnd())
	fmt.Println("end of partition 0:", ends[0].Offset)
	fmt.Println("delete:", admin.DeleteTopics(ctx, "logs"))
	names, _ := admin.ListTopics(ctx, false)
	fmt.Println("topics left:", len(names))
	// Output:
	// create: <nil>
	// create again: TOPIC_ALREADY_EXISTS retriable: false
	// alter: <nil>
	// partitions: 3 retention.ms: 3600000
	// end of partition 0: 0
	// delete: <nil>
	// topics left: 0
}
