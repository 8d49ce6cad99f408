package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/protocol/wire"
)

func TestAppendResponseHeader(t *testing.T) {
	check := func(key, version int16, want ...byte) {
		t.Helper()
		header := protocol.RequestHeader{APIKey: key, APIVersion: version, CorrelationID: 0x0A0B0C0D}
		if got := protocol.AppendResponseHeader([]byte{0xEE}, header); !bytes.Equal(got, append([]byte{0xEE}, want...)) {
			t.Errorf("key %d v%d: %x, want ee%x", key, version, got, want)
		}
	}
	check(3, 8, 0x0A, 0x0B, 0x0C, 0x0D)       // Metadata v8: classic
	check(3, 9, 0x0A, 0x0B, 0x0C, 0x0D, 0x00) // Metadata v9: flexible, tag byte
	check(0, 9, 0x0A, 0x0B, 0x0C, 0x0D, 0x00) // Produce v9
	check(18, 2, 0x0A, 0x0B, 0x0C, 0x0D)      // ApiVersions v2
	check(18, 3, 0x0A, 0x0B, 0x0C, 0x0D)      // ApiVersions v3: flexible, still no tag byte
	check(18, 4, 0x0A, 0x0B, 0x0C, 0x0D)
	check(47, 0, 0x0A, 0x0B, 0x0C, 0x0D) // OffsetDelete: never flexible
	check(7, 0, 0x0A, 0x0B, 0x0C, 0x0D)  // ControlledShutdown v0
}

// TestEncodeResponseRoundTrip encodes responses at the request's version and decodes them as a
// client would, through the wire test client.
func TestEncodeResponseRoundTrip(t *testing.T) {
	metadataResponse := func() kmsg.Response {
		resp := kmsg.NewPtrMetadataResponse()
		broker := kmsg.NewMetadataResponseBroker()
		broker.NodeID, broker.Host, broker.Port = 1, "127.0.0.1", 9092
		resp.Brokers = append(resp.Brokers, broker)
		topic := kmsg.NewMetadataResponseTopic()
		topic.Topic = kmsg.StringPtr("orders")
		topic.ErrorCode = protocol.UnknownTopicOrPartition.Code
		resp.Topics = append(resp.Topics, topic)
		return resp
	}
	for _, version := range []int16{0, 1, 7, 8, 9, 12} {
		request := kmsg.NewPtrMetadataRequest()
		request.SetVersion(version)
		header, _, err := protocol.ParseRequest(wire.EncodeRequest(77, "c", request))
		if err != nil {
			t.Fatal(err)
		}
		frame := protocol.EncodeResponse(nil, header, metadataResponse())
		if id, err := wire.CorrelationID(frame); err != nil || id != 77 {
			t.Errorf("v%d: correlation id %d, %v", version, id, err)
		}
		decoded, err := wire.DecodeResponse(frame, request)
		if err != nil {
			t.Fatalf("Metadata v%d: %v", version, err)
		}
		metadata := decoded.(*kmsg.MetadataResponse)
		if metadata.Version != version || len(metadata.Topics) != 1 || metadata.Topics[0].ErrorCode != 3 ||
			len(metadata.Brokers) != 1 || metadata.Brokers[0].Host != "127.0.0.1" {
			t.Errorf("Metadata v%d decoded as %+v", version, metadata)
		}
	}
}

func TestEncodeResponsePanicsOnWrongKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a Fetch response to a Metadata request")
		}
	}()
	protocol.EncodeResponse(nil, protocol.RequestHeader{APIKey: 3, APIVersion: 9}, kmsg.NewPtrFetchResponse())
}

func TestParseResponse(t *testing.T) {
	check := func(key, version int16, frame []byte, wantBody []byte, wantErr error) {
		t.Helper()
		id, body, err := protocol.ParseResponse(frame, key, version)
		if !errors.Is(err, wantErr) || (wantErr == nil && (id != 0x01020304 || !bytes.Equal(body, wantBody))) {
			t.Errorf("key %d v%d frame %x: id %x body %x err %v", key, version, frame, id, body, err)
		}
	}
	check(3, 9, []byte{1, 2, 3, 4, 0, 0xAB}, []byte{0xAB}, nil)
	check(3, 8, []byte{1, 2, 3, 4, 0, 0xAB}, []byte{0, 0xAB}, nil)
	check(18, 3, []byte{1, 2, 3, 4, 0, 0xAB}, []byte{0, 0xAB}, nil)
	check(3, 9, []byte{1, 2, 3, 4}, nil, protocol.ErrTruncated)
	check(3, 9, []byte{1, 2, 3}, nil, protocol.ErrTruncated)
	check(1000, 0, []byte{1, 2, 3, 4}, nil, protocol.ErrUnknownAPIKey)
}
