package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func deleteRecordsRequest(version int16, topic string, partition int32, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.SetVersion(version)
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestDeleteRecords(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("trim", 1, map[string]string{"segment.bytes": "1024"})
	c.createTopic("table", 1, map[string]string{"cleanup.policy": "compact"})
	for i := 0; i < 100; i++ {
		c.mustProduce("trim", 0, recordBatch(time.Now(), fmt.Sprint("value ", i)))
	}
	p, err := b.registry.partition("trim", 0)
	if err != nil {
		t.Fatal(err)
	}
	segmentsBefore := p.log.SegmentCount()
	deleteRecords := func(version int16, topic string, offset int64) kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		resp := roundTrip[*kmsg.DeleteRecordsResponse](c, deleteRecordsRequest(version, topic, 0, offset))
		return resp.Topics[0].Partitions[0]
	}
	for version := int16(0); version <= 2; version++ {
		offset := int64(40 + 10*version)
		got := deleteRecords(version, "trim", offset)
		if got.ErrorCode != 0 || got.LowWatermark != offset {
			t.Fatalf("v%d delete before %d: error %d, low watermark %d", version, offset, got.ErrorCode, got.LowWatermark)
		}
	}
	if p.log.LogStartOffset() != 60 || p.log.SegmentCount() >= segmentsBefore {
		t.Fatalf("log start %d, %d segments (were %d)", p.log.LogStartOffset(), p.log.SegmentCount(), segmentsBefore)
	}
	if got := c.fetchPartition(fetchRequest(12, "trim", 0, 10, 1<<20)); got.ErrorCode != protocol.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the log start: error %d, want OFFSET_OUT_OF_RANGE", got.ErrorCode)
	}
	got := c.fetchPartition(fetchRequest(12, "trim", 0, 60, 1<<20))
	records, err := decodeBatches(got.RecordBatches)
	if err != nil || got.ErrorCode != 0 || got.LogStartOffset != 60 || len(records) == 0 || records[0].value != "value 60" {
		t.Fatalf("fetch at the log start: error %d, log start %d, %d records, %v", got.ErrorCode, got.LogStartOffset, len(records), err)
	}
	if code := deleteRecords(2, "trim", 101).ErrorCode; code != protocol.OffsetOutOfRange.Code {
		t.Fatalf("beyond the high watermark: error %d", code)
	}
	if got := deleteRecords(2, "trim", 30); got.ErrorCode != 0 || got.LowWatermark != 60 {
		t.Fatalf("before the log start: %+v", got)
	}
	if got := deleteRecords(2, "trim", -1); got.ErrorCode != 0 || got.LowWatermark != 100 {
		t.Fatalf("-1 (the high watermark): %+v", got)
	}
	if code := deleteRecords(2, "table", 0).ErrorCode; code != protocol.PolicyViolation.Code {
		t.Fatalf("compacted topic: error %d, want POLICY_VIOLATION", code)
	}
	if code := deleteRecords(2, "nope", 0).ErrorCode; code != protocol.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: error %d", code)
	}
}
