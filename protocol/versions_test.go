package protocol_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/protocol/wire"
)

// notesTable is the set of versions from KAFKA-NOTES.md that serves franz-go, librdkafka, sarama and
// kafka-go.
func notesTable(t *testing.T) protocol.VersionTable {
	t.Helper()
	table, err := protocol.NewVersionTable(map[int16]protocol.VersionRange{
		18: {0, 4}, 3: {0, 12}, 0: {3, 9}, 1: {4, 12}, 2: {0, 7}, 10: {0, 4}, 11: {0, 9}, 14: {0, 5},
		12: {0, 4}, 13: {0, 5}, 8: {0, 8}, 9: {0, 8}, 22: {0, 4}, 19: {0, 7}, 20: {0, 6},
		15: {0, 5}, 16: {0, 4}, 42: {0, 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func TestVersionTable(t *testing.T) {
	table := notesTable(t)
	check := func(key, version int16, want bool) {
		t.Helper()
		if got := table.Supports(key, version); got != want {
			t.Errorf("Supports(%d, %d) = %v, want %v", key, version, got, want)
		}
	}
	check(0, 2, false)
	check(0, 3, true)
	check(0, 9, true)
	check(0, 10, false)
	check(18, 0, true)
	check(18, 5, false)
	check(18, -1, false)
	check(4, 0, false)  // LeaderAndISR: known to kmsg, not served
	check(17, 0, false) // SASLHandshake: not served
	check(68, 0, false) // ConsumerGroupHeartbeat: beyond the table's highest key
	check(-1, 0, false)
	check(32767, 0, false)

	if versions, ok := table.Range(1); !ok || versions != (protocol.VersionRange{Min: 4, Max: 12}) {
		t.Errorf("Range(Fetch) = %+v, %v", versions, ok)
	}
	if _, ok := table.Range(5); ok {
		t.Errorf("Range(StopReplica) served")
	}
	want := []int16{0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 42}
	if got := table.APIKeys(); !slices.Equal(got, want) {
		t.Errorf("APIKeys() = %v, want %v", got, want)
	}
	var zero protocol.VersionTable
	if zero.Supports(18, 0) || len(zero.APIKeys()) != 0 {
		t.Errorf("the zero table serves something")
	}
}

func TestNewVersionTableRefuses(t *testing.T) {
	refuse := func(why string, served map[int16]protocol.VersionRange) {
		t.Helper()
		if _, err := protocol.NewVersionTable(served); err == nil {
			t.Errorf("%s: accepted", why)
		}
	}
	refuse("no ApiVersions", map[int16]protocol.VersionRange{3: {0, 12}})
	refuse("empty", nil)
	refuse("unknown key", map[int16]protocol.VersionRange{18: {0, 4}, 9999: {0, 0}})
	refuse("negative key", map[int16]protocol.VersionRange{18: {0, 4}, -1: {0, 0}})
	refuse("min above max", map[int16]protocol.VersionRange{18: {3, 2}})
	refuse("negative min", map[int16]protocol.VersionRange{18: {-1, 2}})
	refuse("beyond kmsg", map[int16]protocol.VersionRange{18: {0, 4}, 3: {0, kmsg.NewPtrMetadataRequest().MaxVersion() + 1}})
}

func TestApiVersionsResponseListsTable(t *testing.T) {
	table := notesTable(t)
	for version := int16(0); version <= 4; version++ {
		request := kmsg.NewPtrApiVersionsRequest()
		request.SetVersion(version)
		request.ClientSoftwareName, request.ClientSoftwareVersion = "sluice-test", "1.0"
		header, _, err := protocol.ParseRequest(wire.EncodeRequest(5, "c", request))
		if err != nil {
			t.Fatal(err)
		}
		frame := protocol.AppendApiVersionsResponse(nil, header, table, 250, 0)
		decoded, err := wire.DecodeResponse(frame, request)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		response := decoded.(*kmsg.ApiVersionsResponse)
		if response.Version != version || response.ErrorCode != 0 || len(response.ApiKeys) != len(table.APIKeys()) {
			t.Fatalf("v%d: %+v", version, response)
		}
		for _, entry := range response.ApiKeys {
			if versions, _ := table.Range(entry.ApiKey); versions != (protocol.VersionRange{Min: entry.MinVersion, Max: entry.MaxVersion}) {
				t.Errorf("v%d: key %d advertised [%d, %d], table %+v", version, entry.ApiKey, entry.MinVersion, entry.MaxVersion, versions)
			}
		}
		wantThrottle := int32(250)
		if version == 0 {
			wantThrottle = 0
		}
		if response.ThrottleMillis != wantThrottle {
			t.Errorf("v%d: throttle %d", version, response.ThrottleMillis)
		}
		// Header: correlation id then straight into the body (error code 0), no tag byte.
		if !bytes.Equal(frame[:6], []byte{0, 0, 0, 5, 0, 0}) {
			t.Errorf("v%d: frame starts %x", version, frame[:6])
		}
	}
}

// TestApiVersionsUnsupportedVersion: a client asking for a newer ApiVersions than served gets a
// header without tag byte and a v0 body with UNSUPPORTED_VERSION and ApiVersions' own range, which
// kmsg decodes as a v0 response, whatever the request's body was.
func TestApiVersionsUnsupportedVersion(t *testing.T) {
	table := notesTable(t)
	for _, version := range []int16{5, 6, 127, 32767} {
		header := protocol.RequestHeader{APIKey: 18, APIVersion: version, CorrelationID: 99}
		frame := protocol.AppendApiVersionsResponse(nil, header, table, 250, protocol.InvalidRequest.Code)
		if !bytes.Equal(frame[:6], []byte{0, 0, 0, 99, 0, 35}) {
			t.Fatalf("v%d: frame starts %x, want correlation id 99 then error 35", version, frame[:6])
		}
		response := kmsg.NewPtrApiVersionsResponse()
		response.SetVersion(0)
		if err := response.ReadFrom(frame[4:]); err != nil {
			t.Fatalf("v%d: kmsg cannot read a v0 body: %v", version, err)
		}
		if len(response.AppendTo(nil)) != len(frame)-4 {
			t.Errorf("v%d: body is not exactly a v0 ApiVersions response", version)
		}
		want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 4}}
		if response.ErrorCode != 35 || !slices.EqualFunc(response.ApiKeys, want, func(a, b kmsg.ApiVersionsResponseApiKey) bool {
			return a.ApiKey == b.ApiKey && a.MinVersion == b.MinVersion && a.MaxVersion == b.MaxVersion
		}) {
			t.Errorf("v%d: %+v", version, response)
		}
	}

	// Through the wire client, with the request a new client would send.
	request := kmsg.NewPtrApiVersionsRequest()
	request.SetVersion(5)
	requestFrame := wire.EncodeRequest(1, "c", request)
	header, _, err := protocol.ParseRequest(requestFrame)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := wire.DecodeResponse(protocol.AppendApiVersionsResponse(nil, header, table, 0, 0), request)
	if err != nil {
		t.Fatal(err)
	}
	if response := decoded.(*kmsg.ApiVersionsResponse); response.Version != 0 || response.ErrorCode != 35 {
		t.Errorf("wire decoded %+v", response)
	}

	// A version below the served minimum is unsupported too.
	narrow, err := protocol.NewVersionTable(map[int16]protocol.VersionRange{18: {3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	frame := protocol.AppendApiVersionsResponse(nil, protocol.RequestHeader{APIKey: 18, APIVersion: 0, CorrelationID: 1}, narrow, 0, 0)
	if want := []byte{0, 0, 0, 1, 0, 35, 0, 0, 0, 1, 0, 18, 0, 3, 0, 4}; !bytes.Equal(frame, want) {
		t.Errorf("v0 below minimum: %x, want %x", frame, want)
	}
}

func TestApiVersionsErrorResponse(t *testing.T) {
	table := notesTable(t)
	request := kmsg.NewPtrApiVersionsRequest()
	request.SetVersion(3)
	request.ClientSoftwareName = "-bad"
	request.ClientSoftwareVersion = "1"
	header, body, err := protocol.ParseRequest(wire.EncodeRequest(2, "c", request))
	if err != nil {
		t.Fatal(err)
	}
	parsed := kmsg.NewPtrApiVersionsRequest()
	parsed.SetVersion(header.APIVersion)
	if err := parsed.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	invalid := protocol.ValidateApiVersionsRequest(parsed)
	if protocol.CodeFor(invalid) != 42 {
		t.Fatalf("ValidateApiVersionsRequest = %v", invalid)
	}
	decoded, err := wire.DecodeResponse(protocol.AppendApiVersionsResponse(nil, header, table, 10, protocol.CodeFor(invalid)), request)
	if err != nil {
		t.Fatal(err)
	}
	if response := decoded.(*kmsg.ApiVersionsResponse); response.ErrorCode != 42 || len(response.ApiKeys) != 0 || response.ThrottleMillis != 10 {
		t.Errorf("INVALID_REQUEST answer %+v", response)
	}
}
