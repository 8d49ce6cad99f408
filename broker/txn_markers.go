package broker

// Sending transaction markers: to the partitions this broker leads directly (partition.writeMarker,
// then an acks=all wait), to the others with WriteTxnMarkers (API 27) to their leader, over one
// franz-go client owned by the broker. A partition whose topic was deleted needs no marker.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/txn"
)

type markerSender struct {
	b  *Broker
	mu struct {
		sync.Mutex
		client *kgo.Client
	}
}

func newMarkerSender(b *Broker) *markerSender { return &markerSender{b: b} }

func (s *markerSender) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.client != nil {
		s.mu.client.Close()
		s.mu.client = nil
	}
}

// peers is the client for WriteTxnMarkers, made at first use.
func (s *markerSender) peers() (*kgo.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.client != nil {
		return s.mu.client, nil
	}
	seed := net.JoinHostPort(s.b.advertised.host, strconv.Itoa(int(s.b.advertised.port)))
	options := append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.ClientID("sluice-txn-markers")}, s.b.interBrokerKgoOptions()...)
	if s.b.config.interBrokerSpec().Protocol.TLS() {
		options = append(options, kgo.DialTLSConfig(s.b.config.InterBrokerTLS.Clone()))
	}
	client, err := kgo.NewClient(options...)
	if err != nil {
		return nil, fmt.Errorf("broker: marker client: %w", err)
	}
	s.mu.client = client
	return client, nil
}

// send writes the markers of one transaction to every partition and waits for them to be
// acknowledged by each partition's in-sync replicas.
func (s *markerSender) send(producerID int64, epoch int16, commit bool, partitions []txn.Partition) error {
	meta := s.b.coordinator.Metadata()
	byLeader := map[int32][]txn.Partition{}
	for _, tp := range partitions {
		topic := meta.Topics[tp.Topic]
		if topic == nil || int(tp.Partition) >= len(topic.Partitions) {
			continue
		}
		leader := topic.Partitions[tp.Partition].Leader
		byLeader[leader] = append(byLeader[leader], tp)
	}
	var wait sync.WaitGroup
	errs := make(chan error, len(partitions)+len(byLeader))
	for leader, tps := range byLeader {
		if leader == s.b.config.NodeID {
			for _, tp := range tps {
				wait.Add(1)
				go func() {
					defer wait.Done()
					errs <- s.b.writeLocalMarker(tp, producerID, epoch, commit)
				}()
			}
			continue
		}
		wait.Add(1)
		go func() {
			defer wait.Done()
			errs <- s.sendRemote(leader, producerID, epoch, commit, tps)
		}()
	}
	wait.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// writeLocalMarker writes one marker to a partition this broker leads and awaits its acks. A
// partition at a newer producer epoch already had its transaction closed by a newer decision.
func (b *Broker) writeLocalMarker(tp txn.Partition, producerID int64, epoch int16, commit bool) error {
	p, err := b.registry.partition(tp.Topic, tp.Partition)
	if err != nil {
		return err
	}
	lastOffset, err := p.writeMarker(producerID, epoch, commit, 0)
	if errors.Is(err, protocol.InvalidProducerEpoch) {
		b.logger.Warn("transaction marker superseded", "topic", tp.Topic, "partition", tp.Partition, "producer_id", producerID, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	p.appended()
	acked := make(chan error, 1)
	p.replica.AwaitAcks(lastOffset, p.state.Load().minInsync, func(err error) { acked <- err })
	select {
	case err := <-acked:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("broker: marker on %s-%d not acknowledged: %w", tp.Topic, tp.Partition, protocol.RequestTimedOut)
	}
}

func (s *markerSender) sendRemote(leader int32, producerID int64, epoch int16, commit bool, tps []txn.Partition) error {
	client, err := s.peers()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	marker := kmsg.NewWriteTxnMarkersRequestMarker()
	marker.ProducerID, marker.ProducerEpoch, marker.Committed = producerID, epoch, commit
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(marker.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			marker.Topics = append(marker.Topics, t)
		}
		marker.Topics[i].Partitions = append(marker.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, marker)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client.Broker(int(leader)))
	if err != nil {
		return fmt.Errorf("broker: WriteTxnMarkers to node %d: %w", leader, err)
	}
	var errs []error
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					errs = append(errs, fmt.Errorf("broker: marker on %s-%d at node %d: %w", t.Topic, p.Partition, leader, protocol.ErrorCodeOf(p.ErrorCode)))
				}
			}
		}
	}
	return errors.Join(errs...)
}
