package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/protocol"
)

// clientDriver drives sluice's client/. Producers share one Client (one connection per broker and
// role), as an application would; each consumer has its own, so fetches of different consumers do
// not queue behind each other on one connection.
type clientDriver struct {
	brokers []string
	shared  *client.Client
}

func newClientDriver(brokers []string) (*clientDriver, error) {
	c, err := client.New(client.WithSeedBrokers(brokers...), client.WithClientID("sluice-bench"))
	if err != nil {
		return nil, err
	}
	return &clientDriver{brokers: brokers, shared: c}, nil
}

func (d *clientDriver) CreateTopic(ctx context.Context, name string, partitions int32) error {
	err := client.NewAdmin(d.shared).CreateTopics(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: -1})
	if errors.Is(err, protocol.TopicAlreadyExists) {
		return nil
	}
	return err
}

func (d *clientDriver) DeleteTopic(ctx context.Context, name string) error {
	return client.NewAdmin(d.shared).DeleteTopics(ctx, name)
}

func (d *clientDriver) NewProducer(ctx context.Context, w Workload) (Producer, error) {
	acks, _ := ParseAcks(w.Acks)
	opts := []client.ProducerOption{
		client.WithAcks(client.Acks(acks)), client.WithLinger(w.Linger), client.WithBatchMaxBytes(w.BatchMaxBytes),
		client.WithMaxBufferedBytes(w.MaxPendingBytes), client.WithIdempotence(client.IdempotenceOff),
	}
	if w.Compression == "zstd" {
		opts = append(opts, client.WithCompression(client.CompressionZstd))
	}
	p, err := client.NewProducer(ctx, d.shared, opts...)
	if err != nil {
		return nil, err
	}
	return &clientProducer{producer: p}, nil
}

type clientProducer struct{ producer *client.Producer }

func (p *clientProducer) Send(ctx context.Context, topic string, key, value []byte, done func(error)) error {
	return p.producer.Produce(ctx, &client.Record{Topic: topic, Key: key, Value: value}, func(_ *client.Record, err error) { done(err) })
}

func (p *clientProducer) Close(ctx context.Context) error { return p.producer.Close(ctx) }

func (d *clientDriver) NewConsumer(ctx context.Context, topic string, partitions []int32, onRecord func([]byte)) (Consumer, error) {
	c, err := client.New(client.WithSeedBrokers(d.brokers...), client.WithClientID("sluice-bench-consumer"))
	if err != nil {
		return nil, err
	}
	consumer, err := client.NewConsumer(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	assignments := make([]client.Assignment, 0, len(partitions))
	for _, p := range partitions {
		assignments = append(assignments, client.Assignment{Topic: topic, Partition: p, Offset: client.AtStart()})
	}
	if err := consumer.Assign(ctx, assignments...); err != nil {
		consumer.Close()
		c.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	cc := &clientConsumer{client: c, consumer: consumer, cancel: cancel}
	cc.loop.Add(1)
	go func() {
		defer cc.loop.Done()
		for {
			fetches, err := consumer.Poll(runCtx)
			if err != nil {
				return
			}
			for _, f := range fetches {
				if f.Err != nil {
					cc.setErr(fmt.Errorf("bench: consume %s-%d: %w", f.Topic, f.Partition, f.Err))
					return
				}
				for _, r := range f.Records {
					onRecord(r.Value)
				}
			}
		}
	}()
	return cc, nil
}

type clientConsumer struct {
	client   *client.Client
	consumer *client.Consumer
	cancel   context.CancelFunc
	loop     sync.WaitGroup
	mu       sync.Mutex
	err      error
}

func (c *clientConsumer) setErr(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *clientConsumer) Close() error {
	c.cancel()
	c.loop.Wait()
	c.consumer.Close()
	c.client.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (d *clientDriver) Close() { d.shared.Close() }
