package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzDriver drives franz-go (kgo) with the settings that match clientDriver's: no idempotence,
// the same linger, batch size and pending-bytes bound.
type franzDriver struct {
	brokers []string
	admin   *kgo.Client
	tls     *tls.Config // nil: plaintext
}

func newFranzDriver(brokers []string, tlsConfig *tls.Config) (*franzDriver, error) {
	d := &franzDriver{brokers: brokers, tls: tlsConfig}
	admin, err := kgo.NewClient(d.options(kgo.SeedBrokers(brokers...), kgo.ClientID("sluice-bench"))...)
	if err != nil {
		return nil, fmt.Errorf("bench: franz-go: %w", err)
	}
	d.admin = admin
	return d, nil
}

// options adds the driver's TLS setting to a client's options.
func (d *franzDriver) options(options ...kgo.Opt) []kgo.Opt {
	if d.tls != nil {
		options = append(options, kgo.DialTLSConfig(d.tls.Clone()))
	}
	return options
}

func (d *franzDriver) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, replicationFactor
	for key, value := range configs {
		config := kmsg.NewCreateTopicsRequestTopicConfig()
		config.Name, config.Value = key, kmsg.StringPtr(value)
		topic.Configs = append(topic.Configs, config)
	}
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, d.admin)
	if err != nil {
		return fmt.Errorf("bench: create topic %s: %w", name, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("bench: create topic %s: %w", name, err)
		}
	}
	return nil
}

func (d *franzDriver) DeleteTopic(ctx context.Context, name string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	topic := kmsg.NewDeleteTopicsRequestTopic()
	topic.Topic = kmsg.StringPtr(name)
	req.Topics, req.TopicNames, req.TimeoutMillis = append(req.Topics, topic), []string{name}, 30000
	resp, err := req.RequestWith(ctx, d.admin)
	if err != nil {
		return fmt.Errorf("bench: delete topic %s: %w", name, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("bench: delete topic %s: %w", name, err)
		}
	}
	return nil
}

func (d *franzDriver) NewProducer(ctx context.Context, w Workload, done func(sent time.Time, err error)) (Producer, error) {
	acks, _ := ParseAcks(w.Acks)
	ackOpt := kgo.LeaderAck()
	switch acks {
	case 0:
		ackOpt = kgo.NoAck()
	case -1:
		ackOpt = kgo.AllISRAcks()
	}
	codec := kgo.NoCompression()
	if w.Compression == "zstd" {
		codec = kgo.ZstdCompression()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.brokers...), kgo.ClientID("sluice-bench"), kgo.RequiredAcks(ackOpt), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(w.Linger), kgo.ProducerBatchMaxBytes(int32(w.BatchMaxBytes)), kgo.ProducerBatchCompression(codec),
		kgo.MaxBufferedBytes(int(w.MaxPendingBytes)), kgo.MaxBufferedRecords(1 << 30),
	}
	if w.Keys == "none" {
		opts = append(opts, kgo.RecordPartitioner(kgo.StickyPartitioner()))
	}
	c, err := kgo.NewClient(d.options(opts...)...)
	if err != nil {
		return nil, fmt.Errorf("bench: franz-go producer: %w", err)
	}
	return &franzProducer{client: c, done: func(r *kgo.Record, err error) { done(r.Timestamp, err) }}, nil
}

type franzProducer struct {
	client *kgo.Client
	done   func(*kgo.Record, error)
}

func (p *franzProducer) Send(ctx context.Context, topic string, key, value []byte, sent time.Time) error {
	// kgo.Produce blocks while the buffer is full, like client.Producer.Produce.
	p.client.Produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: sent}, p.done)
	return nil
}

func (p *franzProducer) Close(ctx context.Context) error {
	err := p.client.Flush(ctx)
	p.client.Close()
	return err
}

func (d *franzDriver) NewConsumer(ctx context.Context, topic, group string, onRecord func([]byte, time.Time)) (Consumer, error) {
	signal := newAssignedSignal()
	c, err := kgo.NewClient(d.options(kgo.SeedBrokers(d.brokers...), kgo.ClientID("sluice-bench-consumer"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(groupHeartbeatInterval),
		kgo.AutoCommitInterval(5*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			signal.assigned(len(assigned[topic]))
		}))...)
	if err != nil {
		return nil, fmt.Errorf("bench: franz-go consumer: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	fc := &franzConsumer{client: c, signal: signal, cancel: cancel}
	fc.loop.Add(1)
	go func() {
		defer fc.loop.Done()
		for runCtx.Err() == nil {
			fetches := c.PollFetches(runCtx)
			fetches.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					fc.setErr(fmt.Errorf("bench: consume %s-%d: %w", t, p, err))
				}
			})
			received := time.Now()
			fetches.EachRecord(func(r *kgo.Record) { onRecord(r.Value, received) })
		}
	}()
	return fc, nil
}

type franzConsumer struct {
	client *kgo.Client
	signal *assignedSignal
	cancel context.CancelFunc
	loop   sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func (c *franzConsumer) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

func (c *franzConsumer) Assigned() <-chan struct{} { return c.signal.ch }

// Close leaves the group (committing on revoke, as autocommitting kgo does) and closes the client.
func (c *franzConsumer) Close() error {
	c.cancel()
	c.loop.Wait()
	c.client.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (d *franzDriver) Close() { d.admin.Close() }
