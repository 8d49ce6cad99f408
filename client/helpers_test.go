package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/brokertest"
	"github.com/sluice-mq/sluice/client"
)

// startBroker runs an in-process broker on ephemeral ports and returns its Kafka address.
func startBroker(t testing.TB) string {
	t.Helper()
	return brokertest.Start(t, nil).Addr().String()
}

func newClient(t testing.TB, address string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(append([]client.Option{client.WithSeedBrokers(address)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newProducer(t testing.TB, c *client.Client, opts ...client.ProducerOption) *client.Producer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(ctx, c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil && !errors.Is(err, client.ErrClosed) {
			t.Errorf("close producer: %v", err)
		}
	})
	return p
}

func newConsumer(t testing.TB, c *client.Client, opts ...client.ConsumerOption) *client.Consumer {
	t.Helper()
	consumer, err := client.NewConsumer(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consumer.Close() })
	return consumer
}

func createTopic(t testing.TB, c *client.Client, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.NewAdmin(c).CreateTopics(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// assignAll assigns every partition of topic from offset.
func assignAll(t testing.TB, consumer *client.Consumer, topic string, partitions int32, offset client.Offset) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var assignments []client.Assignment
	for p := int32(0); p < partitions; p++ {
		assignments = append(assignments, client.Assignment{Topic: topic, Partition: p, Offset: offset})
	}
	if err := consumer.Assign(ctx, assignments...); err != nil {
		t.Fatal(err)
	}
}

// pollN polls until want records arrived and returns them in arrival order.
func pollN(t testing.TB, consumer *client.Consumer, want int) []*client.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out []*client.Record
	for len(out) < want {
		fetches, err := consumer.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d of %d records: %v", len(out), want, err)
		}
		for _, f := range fetches {
			if f.Err != nil {
				t.Fatalf("fetch %s-%d: %v", f.Topic, f.Partition, f.Err)
			}
			out = append(out, f.Records...)
		}
	}
	if len(out) != want {
		t.Fatalf("polled %d records, want %d", len(out), want)
	}
	return out
}
