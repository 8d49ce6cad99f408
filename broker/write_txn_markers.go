package broker

// WriteTxnMarkers v0-v1 (API 27), sent by a transaction coordinator to the leader of the
// partitions of a transaction: each marker (commit or abort, producer id and epoch) is appended as
// a control batch to every named partition this broker leads and answered once acknowledged by
// the partition's in-sync replicas. Per partition: not led here NOT_LEADER_OR_FOLLOWER, unknown
// UNKNOWN_TOPIC_OR_PARTITION, a producer already at a newer epoch INVALID_PRODUCER_EPOCH (Kafka's
// answer to a stale coordinator; the coordinator treats it as superseded).

import (
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleWriteTxnMarkers(r *request, req *kmsg.WriteTxnMarkersRequest) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	var wait sync.WaitGroup
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	for i, m := range req.Markers {
		for j, t := range m.Topics {
			for k, partition := range t.Partitions {
				result := &resp.Markers[i].Topics[j].Partitions[k]
				*result = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				result.Partition = partition
				wait.Add(1)
				go func() {
					defer wait.Done()
					p, err := b.registry.partition(t.Topic, partition)
					if err == nil {
						var lastOffset int64
						if lastOffset, err = p.writeMarker(m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch); err == nil {
							p.appended()
							acked := make(chan error, 1)
							p.replica.AwaitAcks(lastOffset, p.state.Load().minInsync, func(err error) { acked <- err })
							err = <-acked
						}
					}
					result.ErrorCode = protocol.CodeFor(err)
					if result.ErrorCode == protocol.UnknownServerError.Code && !errors.Is(err, protocol.UnknownServerError) {
						result.ErrorCode = protocol.KafkaStorageError.Code
					}
				}()
			}
		}
	}
	wait.Wait()
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					r.failed()
				}
			}
		}
	}
	r.respond(resp)
}
