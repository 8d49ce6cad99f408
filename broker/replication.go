package broker

// The broker's side of replication wiring: where other brokers are, and how a leader's ISR change
// reaches the controller.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/replication"
)

// brokerAddress resolves a broker's Kafka listener from the metadata (followers dial leaders).
func (b *Broker) brokerAddress(nodeID int32) (string, bool) {
	if b.coordinator == nil {
		return "", false
	}
	broker, ok := b.coordinator.Metadata().Brokers[nodeID]
	if !ok {
		return "", false
	}
	return net.JoinHostPort(broker.Host, strconv.Itoa(int(broker.Port))), true
}

// proposeISR sends a leader's ISR change to the controller.
func (b *Broker) proposeISR(ctx context.Context, topic string, partition, leaderEpoch, partitionEpoch int32, isr []int32) error {
	if _, err := b.coordinator.AlterPartition(ctx, topic, partition, b.config.NodeID, leaderEpoch, partitionEpoch, isr); err != nil {
		return fmt.Errorf("broker: ISR change of %s-%d to %v: %w", topic, partition, isr, err)
	}
	return nil
}

// reportUnreachableLeader tells the controller that this broker's fetches get no answer from
// leader (replication.Config.LeaderUnreachableAfter); the controller may move leadership.
func (b *Broker) reportUnreachableLeader(leader int32) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.coordinator.ReportUnreachableLeader(ctx, b.config.NodeID, leader); err != nil {
		b.logger.Debug("broker: report unreachable leader", "leader", leader, "err", err)
	}
}

// controlledShutdownTimeout bounds how long a stopping broker waits for the controller to move
// its leaderships away.
const controlledShutdownTimeout = 5 * time.Second

// controlledShutdown asks the controller to move leadership off this broker before it stops, so
// that clients see retriable errors only. A broker alone in its cluster has nowhere to move to.
func (b *Broker) controlledShutdown(ctx context.Context) {
	if b.coordinator == nil || len(b.coordinator.Metadata().Brokers) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, controlledShutdownTimeout)
	defer cancel()
	if err := b.coordinator.ShutdownBroker(ctx, b.config.NodeID); err != nil {
		b.logger.Warn("controlled shutdown: leadership not moved; followers take over after the session timeout", "err", err)
		return
	}
	// Wait until this node has applied the change, so that its partitions stopped leading.
	if err := b.registry.waitVersion(ctx, b.coordinator.Metadata().Version); err != nil {
		b.logger.Warn("controlled shutdown", "err", err)
	}
	b.logger.Info("controlled shutdown: leadership moved off this broker")
}

// followerFetched records a follower's fetch of p (its fetch offset, the durable offset it reports
// in replication.DurableOffsetTag, and replication.FailedCopyTag if its copy failed) and returns the high watermark to send it. A fetch that
// moves the high watermark wakes the consumer fetches parked on p.
func (b *Broker) followerFetched(p *partition, follower int32, rp kmsg.FetchRequestTopicPartition, arrived time.Time) (int64, error) {
	durable := int64(-1)
	copyFailed := false
	rp.UnknownTags.Each(func(key uint32, value []byte) {
		switch {
		case key == replication.DurableOffsetTag && len(value) == 8:
			durable = int64(binary.BigEndian.Uint64(value))
		case key == replication.FailedCopyTag:
			copyFailed = true
		}
	})
	if durable < 0 {
		durable = rp.FetchOffset // a follower that does not report durability: Kafka's semantics
	}
	before := p.replica.HighWatermark()
	high, err := p.replica.FollowerFetched(follower, rp.CurrentLeaderEpoch, rp.FetchOffset, durable, copyFailed, arrived)
	if err != nil {
		return 0, err
	}
	if high > before {
		p.appended()
	}
	return high, nil
}

// liveBrokerIDs are the registered brokers that are not fenced, ascending.
func liveBrokerIDs(meta *coordinator.Metadata) []int32 {
	return meta.LiveBrokerIDs()
}
