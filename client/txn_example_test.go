package client_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// A consume-transform-produce loop with exactly-once results: each transaction holds the output of
// a batch of input records and the group's input offsets after them, so a crash anywhere leaves
// either both or neither. Automatic commits are off (the transaction commits the offsets), input is
// read read_committed, and after an aborted transaction the member rejoins, to read again from the
// committed offsets.
func ExampleProducer_transaction() {
	address, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(client.WithSeedBrokers(address))
	defer c.Close()
	admin := client.NewAdmin(c)
	admin.CreateTopics(ctx, client.TopicSpec{Name: "words", Partitions: 1, ReplicationFactor: 1},
		client.TopicSpec{Name: "shouted", Partitions: 1, ReplicationFactor: 1})
	input, _ := client.NewProducer(ctx, c)
	for _, word := range []string{"exactly", "once", "please"} {
		input.ProduceSync(ctx, &client.Record{Topic: "words", Value: []byte(word)})
	}
	input.Close(ctx)

	producer, err := client.NewProducer(ctx, c, client.WithTransactionalID("shouter-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer producer.Close(ctx)
	member, _ := client.NewGroupConsumer(c, "shouters", []string{"words"},
		client.WithAutoCommitInterval(0), client.WithCommitOnRevoke(false), client.WithResetOffset(client.AtStart()),
		client.WithGroupConsumerOptions(client.WithReadCommitted()))
	defer member.Close(ctx)
	for done := 0; done < 3; {
		fetches, err := member.Poll(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		membership := member.Membership() // the generation these records belong to
		offsets := map[client.TopicPartition]int64{}
		producer.BeginTransaction()
		for _, f := range fetches {
			for _, r := range f.Records {
				producer.Produce(ctx, &client.Record{Topic: "shouted", Value: []byte(strings.ToUpper(string(r.Value)))}, nil)
				offsets[client.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = r.Offset + 1
				done++
			}
		}
		if err := producer.SendOffsets(ctx, "shouters", membership, offsets); err != nil {
			producer.AbortTransaction(ctx) // and, in a real loop, rejoin to read from the committed offsets
			fmt.Println(err)
			return
		}
		if err := producer.CommitTransaction(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}

	reader, _ := client.NewConsumer(c, client.WithReadCommitted())
	defer reader.Close()
	reader.Assign(ctx, client.Assignment{Topic: "shouted", Partition: 0, Offset: client.AtStart()})
	pollCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for read := 0; read < 3; {
		fetches, err := reader.Poll(pollCtx)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, f := range fetches {
			for _, r := range f.Records {
				fmt.Println(string(r.Value))
				read++
			}
		}
	}
	committed, _ := member.CommittedOffsets(ctx, client.TopicPartition{Topic: "words", Partition: 0})
	fmt.Println("committed input offset:", committed[client.TopicPartition{Topic: "words", Partition: 0}])
	// Output:
	// EXACTLY
	// ONCE
	// PLEASE
	// committed input offset: 3
}
