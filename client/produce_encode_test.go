package client

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// TestProduceFrameMatchesKmsg checks the writev encoding of produce requests against kmsg's, for
// every version it handles, with several topics and partitions and an empty batch.
func TestProduceFrameMatchesKmsg(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30_000
	for _, name := range []string{"alpha", "b"} {
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = name
		for p := int32(0); p < 3; p++ {
			partition := kmsg.NewProduceRequestTopicPartition()
			partition.Partition = p
			partition.Records = bytes.Repeat([]byte{byte(p + 1)}, int(p)*200)
			topic.Partitions = append(topic.Partitions, partition)
		}
		req.Topics = append(req.Topics, topic)
	}
	clientID := "test"
	for version := int16(3); version <= 11; version++ {
		req.SetVersion(version)
		header := protocol.AppendRequestHeader(nil, protocol.RequestHeader{APIKey: 0, APIVersion: version, CorrelationID: 7, ClientID: &clientID})
		want := append([]byte{0, 0, 0, 0}, header...)
		want = req.AppendTo(want)
		size := len(want) - 4
		want[0], want[1], want[2], want[3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
		buffers, _ := appendProduceFrame(nil, header, version, req)
		var got bytes.Buffer
		buffers.WriteTo(&got)
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("version %d: frame differs from kmsg's (%d vs %d bytes)", version, got.Len(), len(want))
		}
	}
}
