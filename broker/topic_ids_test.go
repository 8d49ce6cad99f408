package broker

// Topic ids in the raw-socket test client: Produce and Fetch from v13 carry topic ids only. So that
// the tests written against topic names run at every version, the client fills in the id of each
// named topic that has none before sending (the wire carries only the id), and the name of each
// topic id it knows in the decoded response. A test that wants an unknown id sets it, with no name.

import (
	"crypto/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (c *testConn) topicIDOf(name string) [16]byte {
	if c.broker == nil || name == "" {
		return [16]byte{}
	}
	if t, ok := c.broker.coordinator.Metadata().Topics[name]; ok {
		return t.ID
	}
	return [16]byte{}
}

func (c *testConn) topicNameOf(id [16]byte) string {
	if c.broker == nil {
		return ""
	}
	for name, t := range c.broker.coordinator.Metadata().Topics {
		if t.ID == id {
			return name
		}
	}
	return ""
}

func (c *testConn) fillTopicIDs(req kmsg.Request) {
	switch req := req.(type) {
	case *kmsg.FetchRequest:
		for i := range req.Topics {
			if req.Topics[i].TopicID == ([16]byte{}) {
				req.Topics[i].TopicID = c.topicIDOf(req.Topics[i].Topic)
			}
		}
	case *kmsg.ProduceRequest:
		for i := range req.Topics {
			if req.Topics[i].TopicID == ([16]byte{}) {
				req.Topics[i].TopicID = c.topicIDOf(req.Topics[i].Topic)
			}
		}
	}
}

func (c *testConn) fillTopicNames(resp kmsg.Response) {
	switch resp := resp.(type) {
	case *kmsg.FetchResponse:
		if resp.Version >= 13 {
			for i := range resp.Topics {
				resp.Topics[i].Topic = c.topicNameOf(resp.Topics[i].TopicID)
			}
		}
	case *kmsg.ProduceResponse:
		if resp.Version >= 13 {
			for i := range resp.Topics {
				resp.Topics[i].Topic = c.topicNameOf(resp.Topics[i].TopicID)
			}
		}
	}
}

func TestTopicIDsInProduceAndFetch(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("by-id", 1, nil)
	id := c.topicIDOf("by-id")
	if id == ([16]byte{}) {
		t.Fatal("topic has no id")
	}
	var unknown [16]byte
	rand.Read(unknown[:])

	for version := int16(13); version <= 13; version++ {
		req := produceRequest(version, -1, "", 0, recordBatch(batchTime, "sent by id"))
		req.Topics[0].TopicID = id
		resp := roundTrip[*kmsg.ProduceResponse](c, req)
		if len(resp.Topics) != 1 || resp.Topics[0].TopicID != id || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("produce v%d by id: %+v", version, resp.Topics)
		}
		req = produceRequest(version, -1, "", 0, recordBatch(batchTime, "lost"))
		req.Topics[0].TopicID = unknown
		resp = roundTrip[*kmsg.ProduceResponse](c, req)
		if resp.Topics[0].TopicID != unknown || resp.Topics[0].Partitions[0].ErrorCode != protocol.UnknownTopicID.Code {
			t.Fatalf("produce v%d unknown id: %+v; want UNKNOWN_TOPIC_ID", version, resp.Topics)
		}
	}
	for version := int16(13); version <= 18; version++ {
		req := fetchRequest(version, "", 0, 0, 1<<20)
		req.Topics[0].TopicID = id
		resp := roundTrip[*kmsg.FetchResponse](c, req)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].TopicID != id || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("fetch v%d by id: %+v", version, resp)
		}
		records, err := decodeBatches(resp.Topics[0].Partitions[0].RecordBatches)
		if err != nil {
			t.Fatal(err)
		}
		assertRecords(t, records, "sent by id")

		req = fetchRequest(version, "", 0, 0, 1<<20)
		req.Topics[0].TopicID = unknown
		resp = roundTrip[*kmsg.FetchResponse](c, req)
		if len(resp.Topics) != 1 || resp.Topics[0].TopicID != unknown || resp.Topics[0].Partitions[0].ErrorCode != protocol.UnknownTopicID.Code {
			t.Fatalf("fetch v%d unknown id: %+v; want UNKNOWN_TOPIC_ID", version, resp)
		}
	}
}

func TestProduceAtEveryVersion(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("versions", 1, nil)
	var want []string
	for version := int16(3); version <= 13; version++ {
		value := "v" + string(rune('a'+version))
		for _, acks := range []int16{1, -1} {
			result := c.produceWith(produceRequest(version, acks, "versions", 0, recordBatch(batchTime, value)))
			if result.ErrorCode != 0 || result.BaseOffset != int64(len(want)) {
				t.Fatalf("produce v%d acks %d: error %d, base offset %d", version, acks, result.ErrorCode, result.BaseOffset)
			}
			want = append(want, value)
		}
	}
	assertRecords(t, c.readAll("versions", 0), want...)
}
