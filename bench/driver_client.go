package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/protocol"
)

// clientDriver drives sluice's client/. Producers share one Client (one connection per broker and
// role), as an application would; each consumer (a GroupConsumer) has its own, so fetches of
// different consumers do not queue behind each other on one connection.
type clientDriver struct {
	brokers []string
	shared  *client.Client
	tls     *tls.Config // nil: plaintext
}

func newClientDriver(brokers []string, tlsConfig *tls.Config) (*clientDriver, error) {
	d := &clientDriver{brokers: brokers, tls: tlsConfig}
	c, err := client.New(d.options(client.WithSeedBrokers(brokers...), client.WithClientID("sluice-bench"))...)
	if err != nil {
		return nil, err
	}
	d.shared = c
	return d, nil
}

// options adds the driver's TLS setting to a client's options.
func (d *clientDriver) options(options ...client.Option) []client.Option {
	if d.tls != nil {
		options = append(options, client.WithTLS(d.tls))
	}
	return options
}

func (d *clientDriver) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string) error {
	err := client.NewAdmin(d.shared).CreateTopics(ctx, client.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: replicationFactor, Configs: configs})
	if errors.Is(err, protocol.TopicAlreadyExists) {
		return nil
	}
	return err
}

func (d *clientDriver) DeleteTopic(ctx context.Context, name string) error {
	return client.NewAdmin(d.shared).DeleteTopics(ctx, name)
}

func (d *clientDriver) NewProducer(ctx context.Context, w Workload, done func(sent time.Time, err error)) (Producer, error) {
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
	return &clientProducer{producer: p, done: func(r *client.Record, err error) { done(r.Timestamp, err) }}, nil
}

type clientProducer struct {
	producer *client.Producer
	done     func(*client.Record, error)
	// records is a slab the next Records are taken from: one allocation per recordSlab records.
	// Send is called from one goroutine.
	records []client.Record
}

const recordSlab = 256

func (p *clientProducer) Send(ctx context.Context, topic string, key, value []byte, sent time.Time) error {
	if len(p.records) == 0 {
		p.records = make([]client.Record, recordSlab)
	}
	r := &p.records[0]
	p.records = p.records[1:]
	r.Topic, r.Key, r.Value, r.Timestamp = topic, key, value, sent
	return p.producer.Produce(ctx, r, p.done)
}

func (p *clientProducer) Close(ctx context.Context) error { return p.producer.Close(ctx) }

func (d *clientDriver) NewConsumer(ctx context.Context, topic, group string, onRecord func([]byte, time.Time)) (Consumer, error) {
	c, err := client.New(d.options(client.WithSeedBrokers(d.brokers...), client.WithClientID("sluice-bench-consumer"))...)
	if err != nil {
		return nil, err
	}
	signal := newAssignedSignal()
	member, err := client.NewGroupConsumer(c, group, []string{topic},
		client.WithBalancers(client.CooperativeStickyBalancer()), client.WithResetOffset(client.AtStart()),
		client.WithHeartbeatInterval(groupHeartbeatInterval), client.WithAutoCommitInterval(5*time.Second),
		client.WithOnAssigned(func(_ context.Context, partitions []client.TopicPartition) { signal.assigned(len(partitions)) }))
	if err != nil {
		c.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	cc := &clientConsumer{client: c, member: member, signal: signal, cancel: cancel}
	cc.loop.Add(1)
	go func() {
		defer cc.loop.Done()
		for {
			fetches, err := member.Poll(runCtx)
			if err != nil {
				if runCtx.Err() == nil {
					cc.setErr(fmt.Errorf("bench: consume %s as group %s: %w", topic, group, err))
				}
				return
			}
			received := time.Now()
			for _, f := range fetches {
				if f.Err != nil {
					cc.setErr(fmt.Errorf("bench: consume %s-%d: %w", f.Topic, f.Partition, f.Err))
					return
				}
				for _, r := range f.Records {
					onRecord(r.Value, received)
				}
			}
		}
	}()
	return cc, nil
}

type clientConsumer struct {
	client *client.Client
	member *client.GroupConsumer
	signal *assignedSignal
	cancel context.CancelFunc
	loop   sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func (c *clientConsumer) setErr(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *clientConsumer) Assigned() <-chan struct{} { return c.signal.ch }

func (c *clientConsumer) Close() error {
	c.cancel()
	c.loop.Wait()
	// The commit and LeaveGroup of Close can fail when the group's members leave together (a
	// rebalance started by one fails the commit of the next); nothing measured depends on them.
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c.member.Close(closeCtx)
	cancel()
	c.client.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (d *clientDriver) Close() { d.shared.Close() }
