package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/chaos/netproxy"
)

// newClient makes a franz-go client for client id: its sockets bind to netproxy.ClientIP(id) so
// that the proxies can tell it apart (and cut it alone).
func newClient(bootstrap []string, id int32, opts ...kgo.Opt) (*kgo.Client, error) {
	local := &net.TCPAddr{IP: netproxy.ClientIP(id)}
	dialer := &net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	base := []kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.ClientID("chaos-" + strconv.Itoa(int(id))),
		kgo.Dialer(dialer.DialContext),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		// A paused broker keeps its connections open and answers nothing: a client notices only
		// when a request's deadline (its timeout plus this) passes, and only then moves to the
		// new leader. Kafka clients default to 30 s; these fail fast, as a latency-minded
		// deployment would set them.
		kgo.RequestTimeoutOverhead(time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		// kgo retries a request that timed out on the same broker, without asking for metadata,
		// until a later refresh names the new leader; a retry to a paused broker costs another
		// request deadline. Refreshing every 500 ms makes a leader that moved within the first
		// deadline known before it passes (the default is 5 minutes).
		kgo.MetadataMaxAge(500 * time.Millisecond),
	}
	client, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("chaos: client %d: %w", id, err)
	}
	return client, nil
}

func errorText(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// partitionState is one partition as metadata describes it.
type partitionState struct {
	leader, epoch int32
	replicas, isr []int32
}

// describe returns topic's partitions, or ok false.
func describe(ctx context.Context, client *kgo.Client, topic string) (map[int32]partitionState, bool) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil, false
	}
	out := map[int32]partitionState{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = partitionState{leader: p.Leader, epoch: p.LeaderEpoch, replicas: p.Replicas, isr: p.ISR}
	}
	return out, true
}

// awaitInSync polls until every partition of topic has a leader and its whole replica set in the
// ISR, or ctx ends.
func awaitInSync(ctx context.Context, client *kgo.Client, topic string, partitions int32) error {
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	var last map[int32]partitionState
	for {
		parts, ok := describe(ctx, client, topic)
		if ok && int32(len(parts)) == partitions {
			last = parts
			synced := true
			for _, p := range parts {
				synced = synced && p.leader >= 0 && len(p.isr) == len(p.replicas)
			}
			if synced {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: %s not in sync (last seen %v): %w", topic, last, ctx.Err())
		case <-poll.C:
		}
	}
}

// createTopic creates a topic, accepting TOPIC_ALREADY_EXISTS.
func createTopic(ctx context.Context, client *kgo.Client, name string, partitions int32, rf int16, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		topic.Configs = append(topic.Configs, c)
	}
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("chaos: create topic %s: %w", name, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("chaos: create topic %s: %w", name, err)
	}
	return nil
}

// endOffsets lists the high watermark of each partition.
func endOffsets(ctx context.Context, client *kgo.Client, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("chaos: end offset of %s-%d: %w", topic, p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	if int32(len(ends)) != partitions {
		return nil, fmt.Errorf("chaos: end offsets of %d partitions, want %d", len(ends), partitions)
	}
	return ends, nil
}
