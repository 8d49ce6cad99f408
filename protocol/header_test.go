package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/protocol/wire"
)

// kmsgFrame encodes req with kmsg's own RequestFormatter, an encoder independent of this package,
// and strips the size prefix.
func kmsgFrame(t testing.TB, req kmsg.Request, correlationID int32, clientID *string) []byte {
	t.Helper()
	var options []kmsg.RequestFormatterOpt
	if clientID != nil {
		options = append(options, kmsg.FormatterClientID(*clientID))
	}
	if req.Key() == 7 && req.GetVersion() == 0 {
		// kmsg's formatter returns after the 8-byte header v0 of ControlledShutdown v0, without the
		// body or the size: write that frame by hand.
		frame := binary.BigEndian.AppendUint16(nil, 7)
		frame = binary.BigEndian.AppendUint16(frame, 0)
		frame = binary.BigEndian.AppendUint32(frame, uint32(correlationID))
		return req.AppendTo(frame)
	}
	full := kmsg.NewRequestFormatter(options...).AppendRequest(nil, req, correlationID)
	if size := int(binary.BigEndian.Uint32(full)); size != len(full)-4 {
		t.Fatalf("kmsg size prefix %d for %d bytes", size, len(full)-4)
	}
	return full[4:]
}

// sampleRequests returns requests of several APIs at flexible and non-flexible versions, with some
// fields set so that bodies are not trivial.
func sampleRequests() []kmsg.Request {
	withVersion := func(req kmsg.Request, version int16) kmsg.Request {
		req.SetVersion(version)
		return req
	}
	metadata := func(version int16) kmsg.Request {
		req := kmsg.NewPtrMetadataRequest()
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("orders")
		req.Topics = append(req.Topics, topic)
		return withVersion(req, version)
	}
	apiVersions := func(version int16) kmsg.Request {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName = "kgo"
		req.ClientSoftwareVersion = "v1.22.3"
		return withVersion(req, version)
	}
	produce := func(version int16) kmsg.Request {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 5000
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = "orders"
		partition := kmsg.NewProduceRequestTopicPartition()
		partition.Records = []byte("not really a batch")
		topic.Partitions = append(topic.Partitions, partition)
		req.Topics = append(req.Topics, topic)
		return withVersion(req, version)
	}
	findCoordinator := func(version int16) kmsg.Request {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "group-a"
		req.CoordinatorKeys = []string{"group-a"}
		return withVersion(req, version)
	}
	controlledShutdown := func(version int16) kmsg.Request {
		req := kmsg.NewPtrControlledShutdownRequest()
		req.BrokerID = 3
		return withVersion(req, version)
	}
	return []kmsg.Request{
		apiVersions(0), apiVersions(2), apiVersions(3), apiVersions(4),
		metadata(0), metadata(8), metadata(9), metadata(12),
		produce(3), produce(8), produce(9),
		withVersion(kmsg.NewPtrFetchRequest(), 4), withVersion(kmsg.NewPtrFetchRequest(), 12),
		findCoordinator(2), findCoordinator(3), findCoordinator(4),
		withVersion(kmsg.NewPtrJoinGroupRequest(), 5), withVersion(kmsg.NewPtrJoinGroupRequest(), 6),
		withVersion(kmsg.NewPtrOffsetDeleteRequest(), 0),  // never flexible
		withVersion(kmsg.NewPtrSASLHandshakeRequest(), 1), // never flexible
		controlledShutdown(0), controlledShutdown(1), controlledShutdown(3),
	}
}

func TestParseRequestRoundTrip(t *testing.T) {
	clientID := "sluice-test"
	for _, req := range sampleRequests() {
		name := kmsg.NameForKey(req.Key())
		version := req.GetVersion()
		wantBody := req.AppendTo(nil)
		for _, id := range []*string{&clientID, nil} {
			frame := kmsgFrame(t, req, 0x01020304, id)
			header, body, err := protocol.ParseRequest(frame)
			if err != nil {
				t.Fatalf("%s v%d: %v", name, version, err)
			}
			if header.APIKey != req.Key() || header.APIVersion != version || header.CorrelationID != 0x01020304 {
				t.Errorf("%s v%d: header %+v", name, version, header)
			}
			if header.Flexible() != req.IsFlexible() {
				t.Errorf("%s v%d: Flexible() = %v, kmsg says %v", name, version, header.Flexible(), req.IsFlexible())
			}
			switch {
			case req.Key() == 7 && version == 0: // header v0: no client id at all
				if header.ClientID != nil {
					t.Errorf("%s v0: client id %q in a header v0", name, *header.ClientID)
				}
			case id == nil && header.ClientID != nil:
				t.Errorf("%s v%d: null client id parsed as %q", name, version, *header.ClientID)
			case id != nil && (header.ClientID == nil || *header.ClientID != *id):
				t.Errorf("%s v%d: client id %v, want %q", name, version, header.ClientID, *id)
			}
			if !bytes.Equal(body, wantBody) {
				t.Errorf("%s v%d: body %x, want %x", name, version, body, wantBody)
			}
			decoded := kmsg.RequestForKey(header.APIKey)
			decoded.SetVersion(header.APIVersion)
			if err := decoded.ReadFrom(body); err != nil {
				t.Errorf("%s v%d: kmsg cannot decode the body: %v", name, version, err)
			}

			// Our encoders write what kmsg's formatter writes.
			if reencoded := req.AppendTo(protocol.AppendRequestHeader(nil, header)); !bytes.Equal(reencoded, frame) {
				t.Errorf("%s v%d: AppendRequestHeader frame\n%x, kmsg\n%x", name, version, reencoded, frame)
			}
			if id != nil {
				if ours := wire.EncodeRequest(0x01020304, *id, req); !bytes.Equal(ours, frame) {
					t.Errorf("%s v%d: wire.EncodeRequest\n%x, kmsg\n%x", name, version, ours, frame)
				}
			}
		}
	}
}

// TestFlexibilityOfEveryKey compares Flexible, RequestHeaderVersion and ResponseHeaderVersion with
// kmsg's IsFlexible for every request and response kmsg knows, including versions above kmsg's max.
func TestFlexibilityOfEveryKey(t *testing.T) {
	known := 0
	for key := int16(-3); key <= kmsg.MaxKey+5; key++ {
		request := kmsg.RequestForKey(key)
		if request == nil {
			if _, ok := protocol.Flexible(key, 0); ok {
				t.Errorf("key %d: kmsg does not know it, Flexible does", key)
			}
			if _, ok := protocol.RequestHeaderVersion(key, 0); ok {
				t.Errorf("key %d: RequestHeaderVersion claims to know it", key)
			}
			continue
		}
		known++
		response := kmsg.ResponseForKey(key)
		for version := int16(0); version <= request.MaxVersion()+3; version++ {
			request.SetVersion(version)
			response.SetVersion(version)
			flexible, ok := protocol.Flexible(key, version)
			if !ok || flexible != request.IsFlexible() || flexible != response.IsFlexible() {
				t.Errorf("%s v%d: Flexible = %v, %v; kmsg request %v, response %v",
					kmsg.NameForKey(key), version, flexible, ok, request.IsFlexible(), response.IsFlexible())
			}
			wantRequestHeader, wantResponseHeader := 1, 0
			if flexible {
				wantRequestHeader, wantResponseHeader = 2, 1
			}
			if key == 7 && version == 0 {
				wantRequestHeader = 0
			}
			if key == 18 {
				wantResponseHeader = 0
			}
			if got, _ := protocol.RequestHeaderVersion(key, version); got != wantRequestHeader {
				t.Errorf("%s v%d: request header v%d, want v%d", kmsg.NameForKey(key), version, got, wantRequestHeader)
			}
			if got, _ := protocol.ResponseHeaderVersion(key, version); got != wantResponseHeader {
				t.Errorf("%s v%d: response header v%d, want v%d", kmsg.NameForKey(key), version, got, wantResponseHeader)
			}
		}
		if flexible, _ := protocol.Flexible(key, -1); flexible {
			t.Errorf("%s v-1 claims to be flexible", kmsg.NameForKey(key))
		}
	}
	if known < 60 {
		t.Errorf("only %d keys known; is kmsg's table being read?", known)
	}
}

func TestParseRequestUnknownKey(t *testing.T) {
	frame := []byte{0x7F, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x2A, 0xFF, 0xFF}
	header, body, err := protocol.ParseRequest(frame)
	if !errors.Is(err, protocol.ErrUnknownAPIKey) {
		t.Fatalf("err = %v, want ErrUnknownAPIKey", err)
	}
	if header.APIKey != 0x7F00 || header.APIVersion != 2 || header.CorrelationID != 42 || body != nil {
		t.Errorf("header %+v body %x", header, body)
	}
	binary.BigEndian.PutUint16(frame, 0xFFFF) // key -1
	if _, _, err := protocol.ParseRequest(frame); !errors.Is(err, protocol.ErrUnknownAPIKey) {
		t.Errorf("key -1: err = %v", err)
	}
}

// TestParseRequestTruncated cuts a frame at every byte: inside the header it is an error that keeps
// what was read; at or after the header's end the body is what remains.
func TestParseRequestTruncated(t *testing.T) {
	clientID := "client-1"
	for _, req := range sampleRequests() {
		frame := kmsgFrame(t, req, 7, &clientID)
		headerSize := len(frame) - len(req.AppendTo(nil))
		for cut := 0; cut <= len(frame); cut++ {
			header, body, err := protocol.ParseRequest(frame[:cut])
			if cut < headerSize {
				if !errors.Is(err, protocol.ErrTruncated) {
					t.Fatalf("%s v%d cut at %d of header %d: err = %v, want ErrTruncated",
						kmsg.NameForKey(req.Key()), req.GetVersion(), cut, headerSize, err)
				}
				if body != nil {
					t.Fatalf("body %x returned with an error", body)
				}
				if cut >= 8 && header.CorrelationID != 7 {
					t.Fatalf("cut at %d: correlation id %d lost", cut, header.CorrelationID)
				}
				continue
			}
			if err != nil || !bytes.Equal(body, frame[headerSize:cut]) {
				t.Fatalf("%s v%d cut at %d: body %x, err %v", kmsg.NameForKey(req.Key()), req.GetVersion(), cut, body, err)
			}
		}
	}
}

func TestParseRequestTaggedFieldsAndGarbage(t *testing.T) {
	// Metadata v12 is flexible: header v2.
	prefix := []byte{0x00, 0x03, 0x00, 0x0C, 0x00, 0x00, 0x00, 0x05, 0x00, 0x01, 'c'}
	parse := func(tail ...byte) (protocol.RequestHeader, []byte, error) {
		return protocol.ParseRequest(append(append([]byte(nil), prefix...), tail...))
	}
	expectBody := func(want []byte, tail ...byte) {
		t.Helper()
		header, body, err := parse(tail...)
		if err != nil || !bytes.Equal(body, want) || header.ClientID == nil || *header.ClientID != "c" {
			t.Errorf("tail %x: header %+v body %x err %v, want body %x", tail, header, body, err, want)
		}
	}
	expectError := func(target error, tail ...byte) {
		t.Helper()
		if _, body, err := parse(tail...); !errors.Is(err, target) || body != nil {
			t.Errorf("tail %x: body %x err %v, want %v", tail, body, err, target)
		}
	}
	expectBody([]byte{0xAB}, 0x00, 0xAB)
	// Two tags: tag 0 of 2 bytes, tag 300 (two-byte varint) of 1 byte; then the body.
	expectBody([]byte{0xAB, 0xCD}, 0x02, 0x00, 0x02, 0x11, 0x22, 0xAC, 0x02, 0x01, 0x33, 0xAB, 0xCD)
	expectError(protocol.ErrTruncated)                               // no tag count
	expectError(protocol.ErrTruncated, 0x01, 0x00)                   // no size
	expectError(protocol.ErrTruncated, 0x01, 0x00, 0x05, 0x01)       // size beyond the frame
	expectError(protocol.ErrTruncated, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F) // 2^32-1 tags, none there
	expectError(protocol.ErrTruncated, 0x80)                         // varint cut short
	expectError(protocol.ErrMalformed, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F) // varint over 32 bits
	expectError(protocol.ErrMalformed, 0x01, 0x00, 0x80, 0x80, 0x80, 0x80, 0x7F)

	// Client id length -2 is no length at all; a length past the frame is truncation.
	if _, _, err := protocol.ParseRequest([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0xFF, 0xFE}); !errors.Is(err, protocol.ErrMalformed) {
		t.Errorf("client id length -2: err = %v", err)
	}
	if _, _, err := protocol.ParseRequest([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7F, 0xFF, 'a'}); !errors.Is(err, protocol.ErrTruncated) {
		t.Errorf("client id length 32767: err = %v", err)
	}
}

func FuzzParseRequest(f *testing.F) {
	clientID := "fuzz"
	for _, req := range sampleRequests() {
		f.Add(kmsgFrame(f, req, 9, &clientID))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xFF, 0xFF, 0x02, 0x00, 0x01, 0x00, 0x01, 0x01, 0x00})
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, frame []byte) {
		header, body, err := protocol.ParseRequest(frame)
		if err != nil {
			if body != nil {
				t.Fatalf("body %x returned with error %v", body, err)
			}
			return
		}
		// The body is a suffix of the frame, sharing its memory: nothing beyond what was given.
		if len(body) > len(frame) || !bytes.Equal(body, frame[len(frame)-len(body):]) {
			t.Fatalf("body %x is not a suffix of frame %x", body, frame)
		}
		if len(body) > 0 && &body[len(body)-1] != &frame[len(frame)-1] {
			t.Fatalf("body does not alias the frame's end")
		}
		// Writing the header back and parsing again gives the same header and body.
		again, againBody, err := protocol.ParseRequest(append(protocol.AppendRequestHeader(nil, header), body...))
		if err != nil || !sameHeader(header, again) || !bytes.Equal(body, againBody) {
			t.Fatalf("re-encoded header %+v parsed as %+v, body %x vs %x, err %v", header, again, body, againBody, err)
		}
	})
}

func sameHeader(a, b protocol.RequestHeader) bool {
	if a.APIKey != b.APIKey || a.APIVersion != b.APIVersion || a.CorrelationID != b.CorrelationID {
		return false
	}
	if a.ClientID == nil || b.ClientID == nil {
		return a.ClientID == b.ClientID
	}
	return *a.ClientID == *b.ClientID
}

func TestAppendRequestHeaderPanicsOnHugeClientID(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a 40000-byte client id")
		}
	}()
	huge := string(make([]byte, 40000))
	protocol.AppendRequestHeader(nil, protocol.RequestHeader{APIKey: 3, APIVersion: 1, ClientID: &huge})
}
