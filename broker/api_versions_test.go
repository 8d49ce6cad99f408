package broker

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/protocol/wire"
)

// servedAPIs is what the broker must advertise: the ranges of KAFKA-NOTES.md that it serves, plus
// the admin APIs.
var servedAPIs = map[int16][2]int16{
	0:  {3, 13}, // Produce (v13+: topic ids)
	1:  {4, 18}, // Fetch (v13+: topic ids)
	2:  {0, 7},  // ListOffsets
	3:  {0, 12}, // Metadata
	8:  {0, 8},  // OffsetCommit
	9:  {0, 8},  // OffsetFetch
	10: {0, 4},  // FindCoordinator
	11: {0, 9},  // JoinGroup
	12: {0, 4},  // Heartbeat
	13: {0, 5},  // LeaveGroup
	14: {0, 5},  // SyncGroup
	15: {0, 5},  // DescribeGroups
	16: {0, 5},  // ListGroups
	17: {0, 1},  // SaslHandshake
	18: {0, 4},  // ApiVersions
	19: {0, 7},  // CreateTopics
	20: {0, 6},  // DeleteTopics
	21: {0, 2},  // DeleteRecords
	22: {0, 4},  // InitProducerId (Min 0: librdkafka enables idempotence only then)
	23: {0, 4},  // OffsetForLeaderEpoch
	24: {0, 5},  // AddPartitionsToTxn
	25: {0, 4},  // AddOffsetsToTxn
	26: {0, 4},  // EndTxn
	27: {0, 1},  // WriteTxnMarkers
	28: {0, 4},  // TxnOffsetCommit
	29: {0, 3},  // DescribeAcls
	30: {0, 3},  // CreateAcls
	31: {0, 3},  // DeleteAcls
	32: {0, 4},  // DescribeConfigs
	33: {0, 2},  // AlterConfigs
	35: {0, 4},  // DescribeLogDirs
	36: {0, 2},  // SaslAuthenticate
	37: {0, 3},  // CreatePartitions
	42: {0, 2},  // DeleteGroups
	43: {0, 2},  // ElectLeaders
	44: {0, 1},  // IncrementalAlterConfigs
	47: {0, 0},  // OffsetDelete
	48: {0, 1},  // DescribeClientQuotas
	49: {0, 1},  // AlterClientQuotas
	50: {0, 0},  // DescribeUserScramCredentials
	51: {0, 0},  // AlterUserScramCredentials
	60: {0, 1},  // DescribeCluster
	61: {0, 0},  // DescribeProducers
	65: {0, 0},  // DescribeTransactions
	66: {0, 1},  // ListTransactions
	68: {1, 1},  // ConsumerGroupHeartbeat
	69: {0, 1},  // ConsumerGroupDescribe
	76: {1, 1},  // ShareGroupHeartbeat
	77: {0, 1},  // ShareGroupDescribe
	78: {1, 2},  // ShareFetch
	79: {1, 2},  // ShareAcknowledge
	90: {0, 1},  // DescribeShareGroupOffsets
	91: {0, 0},  // AlterShareGroupOffsets
	92: {0, 0},  // DeleteShareGroupOffsets
}

func TestApiVersions(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)

	t.Run("served versions list the table", func(t *testing.T) {
		c := c.in(t)
		for version := int16(0); version <= 4; version++ {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(version)
			req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice-test", "0.1.0-dev"
			resp := roundTrip[*kmsg.ApiVersionsResponse](c, req)
			if resp.ErrorCode != 0 {
				t.Fatalf("v%d: error %d", version, resp.ErrorCode)
			}
			got := map[int16][2]int16{}
			previous := int16(-1)
			for _, api := range resp.ApiKeys {
				if api.ApiKey <= previous {
					t.Errorf("v%d: api keys not ascending: %d after %d", version, api.ApiKey, previous)
				}
				previous = api.ApiKey
				got[api.ApiKey] = [2]int16{api.MinVersion, api.MaxVersion}
			}
			if len(got) != len(servedAPIs) {
				t.Errorf("v%d: %d apis advertised, want %d: %v", version, len(got), len(servedAPIs), got)
			}
			for key, want := range servedAPIs {
				if got[key] != want {
					t.Errorf("v%d: %s (key %d) advertised %v, want %v", version, kmsg.NameForKey(key), key, got[key], want)
				}
			}
		}
	})

	// KIP-511: a version the broker does not know is answered with a v0 body carrying
	// UNSUPPORTED_VERSION and ApiVersions' own range, without parsing the request.
	t.Run("unsupported version gets a v0 answer", func(t *testing.T) {
		c := c.in(t)
		for _, version := range []int16{5, 127} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(version)
			req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice-test", "1"
			correlation := c.send(req)
			frame, err := wire.ReadFrame(c.conn, maxResponseBytes)
			if err != nil {
				t.Fatalf("v%d: %v", version, err)
			}
			if got, _ := wire.CorrelationID(frame); got != correlation {
				t.Fatalf("v%d: correlation %d, want %d", version, got, correlation)
			}
			// Decode the v0 body by hand first: header without tag byte, then error, then the array.
			body := frame[4:]
			if code := int16(binary.BigEndian.Uint16(body)); code != protocol.UnsupportedVersion.Code {
				t.Fatalf("v%d: error %d, want 35", version, code)
			}
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(0)
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("v%d: decode v0 body: %v", version, err)
			}
			if used := len(resp.AppendTo(nil)); used != len(body) {
				t.Fatalf("v%d: body of %d bytes, a v0 response of %d", version, len(body), used)
			}
			if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 4 {
				t.Fatalf("v%d: api keys %+v, want only ApiVersions 0-4", version, resp.ApiKeys)
			}
			// The connection stays usable, as the client retries with a version both sides know.
			retry := kmsg.NewPtrApiVersionsRequest()
			retry.SetVersion(resp.ApiKeys[0].MaxVersion)
			retry.ClientSoftwareName, retry.ClientSoftwareVersion = "sluice-test", "1"
			if again := roundTrip[*kmsg.ApiVersionsResponse](c, retry); again.ErrorCode != 0 || len(again.ApiKeys) != len(servedAPIs) {
				t.Fatalf("retry at v4 after v%d: error %d, %d apis", version, again.ErrorCode, len(again.ApiKeys))
			}
		}
	})

	t.Run("invalid client software", func(t *testing.T) {
		c := c.in(t)
		cases := []struct{ name, version string }{
			{"bad name!", "1.0"},
			{"-leading-dash", "1.0"},
			{"", "1.0"},
			{"sluice-test", "1.0 beta"},
			{"sluice-test", ""},
		}
		for _, tc := range cases {
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			req.ClientSoftwareName, req.ClientSoftwareVersion = tc.name, tc.version
			resp := roundTrip[*kmsg.ApiVersionsResponse](c, req)
			if resp.ErrorCode != protocol.InvalidRequest.Code {
				t.Errorf("software %q %q: error %d, want 42 INVALID_REQUEST", tc.name, tc.version, resp.ErrorCode)
			}
			if len(resp.ApiKeys) != 0 {
				t.Errorf("software %q %q: %d apis listed with an error", tc.name, tc.version, len(resp.ApiKeys))
			}
		}
		// v0-v2 carry no software name: nothing to validate.
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(2)
		if resp := roundTrip[*kmsg.ApiVersionsResponse](c, req); resp.ErrorCode != 0 {
			t.Errorf("v2: error %d", resp.ErrorCode)
		}
	})
	assertServing(t, b)
}
