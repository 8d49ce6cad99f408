package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// Consuming as a member of a group: partitions are assigned by the group, reading starts at the
// group's committed offsets (or the reset policy), and Close commits and leaves.
func ExampleGroupConsumer() {
	address, stop := exampleBroker()
	defer stop()
	ctx := context.Background()
	c, _ := client.New(client.WithSeedBrokers(address))
	defer c.Close()
	client.NewAdmin(c).CreateTopics(ctx, client.TopicSpec{Name: "payments", Partitions: 1, ReplicationFactor: 1})
	p, _ := client.NewProducer(ctx, c)
	for i := 0; i < 3; i++ {
		p.ProduceSync(ctx, &client.Record{Topic: "payments", Value: fmt.Appendf(nil, "payment %d", i)})
	}
	p.Close(ctx)

	assigned := make(chan []client.TopicPartition, 1)
	member, err := client.NewGroupConsumer(c, "billing", []string{"payments"},
		client.WithBalancers(client.CooperativeStickyBalancer(), client.RangeBalancer()),
		client.WithResetOffset(client.AtStart()),
		client.WithAutoCommitInterval(time.Second),
		client.WithOnAssigned(func(_ context.Context, partitions []client.TopicPartition) { assigned <- partitions }),
		client.WithOnRevoked(func(_ context.Context, partitions []client.TopicPartition) {
			fmt.Println("revoked:", partitions) // committed right after this returns
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("assigned:", <-assigned)
	for read := 0; read < 3; {
		fetches, err := member.Poll(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, f := range fetches {
			for _, r := range f.Records {
				fmt.Printf("offset %d: %s\n", r.Offset, r.Value)
				read++
			}
		}
	}
	fmt.Println("protocol:", member.Membership().Protocol)
	fmt.Println("close:", member.Close(ctx))
	// Output:
	// assigned: [{payments 0}]
	// offset 0: payment 0
	// offset 1: payment 1
	// offset 2: payment 2
	// protocol: cooperative-sticky
	// revoked: [{payments 0}]
	// close: <nil>
}
