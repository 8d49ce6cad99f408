package client

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Offset says where to start reading a partition.
type Offset struct {
	kind  offsetKind
	value int64 // the offset (offsetExact) or Unix milliseconds (offsetTime)
}

type offsetKind uint8

const (
	offsetStart offsetKind = iota
	offsetEnd
	offsetExact
	offsetTime
)

// AtStart is the earliest offset still in the log. It is the zero Offset.
func AtStart() Offset { return Offset{kind: offsetStart} }

// AtEnd is the offset the next produced record will get: only records produced later are read.
func AtEnd() Offset { return Offset{kind: offsetEnd} }

// AtOffset is an exact offset.
func AtOffset(offset int64) Offset { return Offset{kind: offsetExact, value: offset} }

// AtTime is the first offset whose record timestamp is at or after t; the end when none is.
func AtTime(t time.Time) Offset { return Offset{kind: offsetTime, value: t.UnixMilli()} }

func (o Offset) String() string {
	switch o.kind {
	case offsetStart:
		return "start"
	case offsetEnd:
		return "end"
	case offsetExact:
		return fmt.Sprintf("offset %d", o.value)
	default:
		return fmt.Sprintf("time %s", time.UnixMilli(o.value).UTC().Format(time.RFC3339Nano))
	}
}

// listOffsetsTimestamp is the ListOffsets query for o: -2 earliest, -1 latest, else a timestamp.
func (o Offset) listOffsetsTimestamp() int64 {
	switch o.kind {
	case offsetStart:
		return -2
	case offsetEnd:
		return -1
	default:
		return o.value
	}
}

// ListedOffset is one partition's answer to a ListOffsets query.
type ListedOffset struct {
	Offset      int64     // -1 when a time query found no record at or after the time
	Timestamp   time.Time // of the record found by a time query; zero otherwise
	LeaderEpoch int32
	Err         error // the partition's error, if any
}

// listOffsets resolves queries (ListOffsets timestamps) per partition, asking each leader.
func (c *Client) listOffsets(ctx context.Context, queries map[TopicPartition]int64) (map[TopicPartition]ListedOffset, error) {
	byLeader := map[int32]map[TopicPartition]int64{}
	out := make(map[TopicPartition]ListedOffset, len(queries))
	for tp, timestamp := range queries {
		info, err := c.metadata.topic(ctx, tp.Topic)
		if err != nil {
			return nil, err
		}
		if tp.Partition < 0 || int(tp.Partition) >= len(info.partitions) {
			out[tp] = ListedOffset{Offset: -1, Err: newKafkaError("list offsets", tp.Topic, tp.Partition, 3, nil)}
			continue
		}
		leader := info.partitions[tp.Partition].leader
		if byLeader[leader] == nil {
			byLeader[leader] = map[TopicPartition]int64{}
		}
		byLeader[leader][tp] = timestamp
	}
	for leader, partitions := range byLeader {
		if leader < 0 {
			for tp := range partitions {
				out[tp] = ListedOffset{Offset: -1, Err: newKafkaError("list offsets", tp.Topic, tp.Partition, 5, nil)}
			}
			c.metadata.requestRefresh()
			continue
		}
		conn, err := c.pool.conn(ctx, leader, roleAdmin)
		if err != nil {
			return nil, err
		}
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		topicIndex := map[string]int{}
		for tp, timestamp := range partitions {
			index, ok := topicIndex[tp.Topic]
			if !ok {
				index = len(req.Topics)
				topicIndex[tp.Topic] = index
				topic := kmsg.NewListOffsetsRequestTopic()
				topic.Topic = tp.Topic
				req.Topics = append(req.Topics, topic)
			}
			part := kmsg.NewListOffsetsRequestTopicPartition()
			part.Partition, part.Timestamp, part.CurrentLeaderEpoch = tp.Partition, timestamp, -1
			req.Topics[index].Partitions = append(req.Topics[index].Partitions, part)
		}
		raw, err := conn.roundTrip(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, t := range raw.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				listed := ListedOffset{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch,
					Err: errorForCode("list offsets", t.Topic, p.Partition, p.ErrorCode, nil)}
				if p.Timestamp >= 0 && partitions[TopicPartition{t.Topic, p.Partition}] >= 0 {
					listed.Timestamp = time.UnixMilli(p.Timestamp)
				}
				out[TopicPartition{t.Topic, p.Partition}] = listed
			}
		}
	}
	for tp := range queries {
		if _, ok := out[tp]; !ok {
			return nil, fmt.Errorf("%w: list offsets answer lacks %s-%d", ErrMalformed, tp.Topic, tp.Partition)
		}
	}
	return out, nil
}
