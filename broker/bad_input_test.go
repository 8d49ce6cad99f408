package broker

// Bad input over a real socket (issue #3): every case must close its own connection (Kafka's answer
// to what it cannot parse) without a byte of response, and leave the broker serving other
// connections with its stored data intact.

import (
	"encoding/binary"
	"net"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/protocol/wire"
)

// rawHeader returns a request header for an arbitrary key and version (v1 layout: key, version,
// correlation id, client id).
func rawHeader(key, version int16, correlation int32) []byte {
	clientID := "sluice-test"
	return protocol.AppendRequestHeader(nil, protocol.RequestHeader{APIKey: key, APIVersion: version, CorrelationID: correlation, ClientID: &clientID})
}

func sizePrefix(size uint32) []byte { return binary.BigEndian.AppendUint32(nil, size) }

func TestBadInputClosesOnlyItsConnection(t *testing.T) {
	b := startBroker(t, nil)
	setup := dial(t, b)
	setup.createTopic("intact", 1, nil)
	stored := []string{"first", "second", "third"}
	setup.mustProduce("intact", 0, recordBatch(batchTime, stored[:2]...))
	setup.mustProduce("intact", 0, recordBatch(batchTime, stored[2:]...))

	// check runs after every case: a fresh connection is served and the log is what was produced.
	check := func(t *testing.T) {
		t.Helper()
		assertServing(t, b)
		assertRecords(t, dial(t, b).readAll("intact", 0), stored...)
	}
	closedAfter := func(t *testing.T, raw ...[]byte) {
		t.Helper()
		c := dial(t, b)
		for _, chunk := range raw {
			c.writeRaw(chunk)
		}
		c.expectClosed()
		check(t)
	}
	frame := func(parts ...[]byte) []byte {
		var body []byte
		for _, p := range parts {
			body = append(body, p...)
		}
		return append(sizePrefix(uint32(len(body))), body...)
	}

	t.Run("garbage: an HTTP request", func(t *testing.T) {
		// "GET " read as a size is 1195725856, far above the frame limit.
		closedAfter(t, []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	})
	t.Run("garbage: a well-sized frame of 0xff", func(t *testing.T) {
		closedAfter(t, frame([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
	})
	t.Run("garbage: frames shorter than a header", func(t *testing.T) {
		closedAfter(t, frame(nil))
		closedAfter(t, frame([]byte{0, 3, 0}))
	})

	t.Run("truncated frame then close", func(t *testing.T) {
		c := dial(t, b)
		c.writeRaw(sizePrefix(100))
		c.writeRaw(rawHeader(3, 1, 1)) // 19 of the 100 bytes
		if err := c.conn.Close(); err != nil {
			t.Fatal(err)
		}
		check(t)
	})
	t.Run("truncated frame then half-close", func(t *testing.T) {
		c := dial(t, b)
		c.writeRaw(sizePrefix(100))
		c.writeRaw(rawHeader(3, 1, 1))
		if err := c.conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
		check(t)
	})

	t.Run("frame sizes out of range", func(t *testing.T) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, size := range []uint32{0x7fffffff, 100<<20 + 1, 0xffffffff, 0x80000000} {
			c := dial(t, b)
			c.writeRaw(append(sizePrefix(size), rawHeader(3, 1, 1)...))
			c.expectClosed()
		}
		runtime.ReadMemStats(&after)
		// The broker runs in this process: a buffer sized from the prefix would show here.
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<20 {
			t.Errorf("%d MiB allocated while refusing oversized frames", allocated>>20)
		}
		check(t)
	})

	t.Run("unknown api key", func(t *testing.T) {
		for _, key := range []int16{9999, kmsg.MaxKey + 1, -1} {
			closedAfter(t, frame(rawHeader(key, 0, 7)))
		}
	})

	t.Run("served api at an unsupported version", func(t *testing.T) {
		cases := []struct {
			req     kmsg.Request
			version int16
		}{
			{kmsg.NewPtrProduceRequest(), 2},
			{kmsg.NewPtrProduceRequest(), 0},
			{kmsg.NewPtrFetchRequest(), 3},
			{kmsg.NewPtrMetadataRequest(), 13},
			{kmsg.NewPtrListOffsetsRequest(), 8},
			{kmsg.NewPtrDescribeClusterRequest(), 2},
		}
		for _, tc := range cases {
			if tc.version > tc.req.MaxVersion() {
				t.Fatalf("%s v%d is beyond kmsg", kmsg.NameForKey(tc.req.Key()), tc.version)
			}
			tc.req.SetVersion(tc.version)
			c := dial(t, b)
			c.send(tc.req)
			c.expectClosed()
		}
		check(t)
	})

	t.Run("malformed body", func(t *testing.T) {
		// Metadata v1: a topics array of 5 entries and nothing after it.
		closedAfter(t, frame(rawHeader(3, 1, 1), []byte{0, 0, 0, 5}))
		// Metadata v1: a topic name of negative length (-5).
		closedAfter(t, frame(rawHeader(3, 1, 1), []byte{0, 0, 0, 1, 0xff, 0xfb}))
		// Produce v7: cut in the middle of the topics array.
		produce := produceRequest(7, 1, "intact", 0, recordBatch(batchTime, "never stored"))
		encoded := wire.EncodeRequest(1, "sluice-test", produce)
		closedAfter(t, frame(encoded[:len(encoded)-40]))
		// CreateTopics v5 (flexible): a compact array length varint that never ends.
		closedAfter(t, frame(protocol.AppendRequestHeader(nil, protocol.RequestHeader{APIKey: 19, APIVersion: 5, CorrelationID: 1}),
			[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
		// Fetch v12: a flexible header whose tagged-field section claims more bytes than there are.
		closedAfter(t, frame(rawHeader(1, 12, 1)[:len(rawHeader(1, 12, 1))-1], []byte{1, 0, 50}))
	})

	t.Run("answered requests before a bad one still go out in order", func(t *testing.T) {
		c := dial(t, b)
		metadata := kmsg.NewPtrMetadataRequest()
		metadata.SetVersion(9)
		first := c.send(metadata)
		versions := kmsg.NewPtrApiVersionsRequest()
		second := c.send(versions)
		c.writeRaw(frame(rawHeader(9999, 0, 99)))
		if resp := c.receive(metadata, first).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
			t.Fatalf("metadata before the bad frame: %+v", resp)
		}
		if resp := c.receive(versions, second).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions before the bad frame: error %d", resp.ErrorCode)
		}
		c.expectClosed()
		check(t)
	})
}

// TestUnservedAPIs sends every API kmsg knows and the broker does not serve, at every version, with
// default fields. Each must be refused: UNSUPPORTED_VERSION in a top-level error code that is on the
// wire at that version, or a closed connection. Never a success.
func TestUnservedAPIs(t *testing.T) {
	b := startBroker(t, nil)
	table := newAPITable()
	answered, closed := 0, 0
	c := dial(t, b)
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if _, served := table.entries[key]; served {
			continue
		}
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for version := int16(0); version <= req.MaxVersion(); version++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(version)
			correlation := c.send(req)
			frame, err := wire.ReadFrame(c.conn, maxResponseBytes)
			if err != nil {
				// Closed: the connection is gone; the next request needs a new one.
				c.expectClosedAfter(err)
				closed++
				c = dial(t, b)
				continue
			}
			if got, _ := wire.CorrelationID(frame); got != correlation {
				t.Fatalf("%s v%d: correlation %d, want %d", kmsg.NameForKey(key), version, got, correlation)
			}
			resp, err := wire.DecodeResponse(frame, req)
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
			}
			code, ok := topLevelErrorCode(resp)
			if !ok || code != protocol.UnsupportedVersion.Code {
				t.Errorf("%s v%d answered with top-level error %d (field present: %v), want 35 UNSUPPORTED_VERSION or a closed connection",
					kmsg.NameForKey(key), version, code, ok)
			}
			answered++
		}
	}
	t.Logf("%d unserved requests answered with UNSUPPORTED_VERSION, %d closed", answered, closed)

	// The ones clients send first, by name, for as long as they are not served.
	for _, tc := range []struct {
		req     kmsg.Request
		version int16
	}{
		{kmsg.NewPtrInitProducerIDRequest(), 4},
		{kmsg.NewPtrSASLHandshakeRequest(), 1},
	} {
		if _, served := table.entries[tc.req.Key()]; served {
			continue
		}
		tc.req.SetVersion(tc.version)
		resp := c.receive(tc.req, c.send(tc.req))
		if code, _ := topLevelErrorCode(resp); code != protocol.UnsupportedVersion.Code {
			t.Errorf("%s v%d: top-level error %d, want 35", kmsg.NameForKey(tc.req.Key()), tc.version, code)
		}
	}
	assertServing(t, b)
}

// expectClosedAfter checks that a failed response read means the broker closed the connection.
func (c *testConn) expectClosedAfter(err error) {
	c.t.Helper()
	if !isClosed(err) {
		c.t.Fatalf("expected a closed connection, got: %v", err)
	}
}

// topLevelErrorCode reads resp's ErrorCode field, and whether the response's encoding at its version
// carries it (a field absent at a version decodes as zero and must not count as an answer).
func topLevelErrorCode(resp kmsg.Response) (int16, bool) {
	field, ok := errorCodeField(resp)
	if !ok {
		return 0, false
	}
	code := field.Int()
	without := resp.AppendTo(nil)
	field.SetInt(code ^ 0x7f)
	with := resp.AppendTo(nil)
	field.SetInt(code)
	return int16(code), string(without) != string(with)
}
