package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
)

// timedBatch builds a batch whose records carry the given timestamps (milliseconds).
func timedBatch(timestamps ...int64) []byte {
	var builder batch.Builder
	builder.Reset(time.UnixMilli(timestamps[0]))
	for _, timestamp := range timestamps {
		builder.Add(batch.Record{Value: []byte("t"), Timestamp: time.UnixMilli(timestamp)})
	}
	return append([]byte(nil), builder.Finish()...)
}

func listOffsetsRequest(version int16, topic string, partition int32, timestamp int64, currentLeaderEpoch int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(version)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.MaxNumOffsets, rp.CurrentLeaderEpoch = partition, timestamp, 1, currentLeaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestListOffsets(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	const topic = "timed"
	c.createTopic(topic, 1, nil)
	// Offsets 0-1 at 1000 and 1500, 2-3 at 2000, 4 at 3000.
	c.mustProduce(topic, 0, timedBatch(1000, 1500))
	c.mustProduce(topic, 0, timedBatch(2000, 2000))
	c.mustProduce(topic, 0, timedBatch(3000))
	leaderEpoch := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, false, topic))).Partitions[0].LeaderEpoch

	list := func(version int16, partition int32, timestamp int64, currentLeaderEpoch int32) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		resp := roundTrip[*kmsg.ListOffsetsResponse](c, listOffsetsRequest(version, topic, partition, timestamp, currentLeaderEpoch))
		if len(resp.Topics) != 1 || resp.Topics[0].Topic != topic || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != partition {
			t.Fatalf("v%d: %+v", version, resp.Topics)
		}
		return resp.Topics[0].Partitions[0]
	}

	// v0 answers old style: a list of offsets.
	for _, tc := range []struct{ timestamp, offset int64 }{{-2, 0}, {-1, 5}} {
		result := list(0, 0, tc.timestamp, -1)
		if result.ErrorCode != 0 || len(result.OldStyleOffsets) != 1 || result.OldStyleOffsets[0] != tc.offset {
			t.Errorf("v0 timestamp %d: error %d, offsets %v; want [%d]", tc.timestamp, result.ErrorCode, result.OldStyleOffsets, tc.offset)
		}
	}

	cases := []struct{ timestamp, offset, foundTimestamp int64 }{
		{-2, 0, -1},     // earliest
		{-1, 5, -1},     // latest: the high watermark
		{0, 0, 1000},    // before everything: the first record
		{1000, 0, 1000}, // exact
		{1200, 1, 1500}, // inside the first batch: its second record
		{1501, 2, 2000}, // between batches: the next batch's first record
		{2000, 2, 2000},
		{3000, 4, 3000},
		{3001, -1, -1}, // after everything
	}
	for version := int16(1); version <= 7; version++ {
		for _, tc := range cases {
			result := list(version, 0, tc.timestamp, -1)
			if result.ErrorCode != 0 || result.Offset != tc.offset || result.Timestamp != tc.foundTimestamp {
				t.Errorf("v%d timestamp %d: error %d, offset %d at %d; want offset %d at %d",
					version, tc.timestamp, result.ErrorCode, result.Offset, result.Timestamp, tc.offset, tc.foundTimestamp)
			}
			if version >= 4 && result.LeaderEpoch != leaderEpoch {
				t.Errorf("v%d timestamp %d: leader epoch %d, metadata says %d", version, tc.timestamp, result.LeaderEpoch, leaderEpoch)
			}
		}
	}
	// Max timestamp (v7) is documented as not tracked: offset -1.
	if result := list(7, 0, -3, -1); result.ErrorCode != 0 || result.Offset != -1 {
		t.Errorf("v7 max timestamp: error %d, offset %d", result.ErrorCode, result.Offset)
	}

	for _, version := range []int16{0, 1, 7} {
		if result := list(version, 1, -1, -1); result.ErrorCode != protocol.UnknownTopicOrPartition.Code {
			t.Errorf("v%d unknown partition: error %d, want 3", version, result.ErrorCode)
		}
	}
	if result := list(4, 0, -1, leaderEpoch+1); result.ErrorCode != protocol.UnknownLeaderEpoch.Code {
		t.Errorf("newer leader epoch: error %d, want 76 UNKNOWN_LEADER_EPOCH", result.ErrorCode)
	}
	if leaderEpoch > 0 {
		if result := list(4, 0, -1, leaderEpoch-1); result.ErrorCode != protocol.FencedLeaderEpoch.Code {
			t.Errorf("older leader epoch: error %d, want 74 FENCED_LEADER_EPOCH", result.ErrorCode)
		}
	}
}
