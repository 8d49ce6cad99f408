package broker

// Each fetch session form (session id, epoch) over a real socket: full fetches are served with
// session id 0 and data, incremental fetches name a session that does not exist.

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func TestFetchSessionForms(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("sessions", 1, nil)
	c.mustProduce("sessions", 0, recordBatch(batchTime, "x", "y"))

	full := func(t *testing.T, version int16, sessionID, epoch int32) {
		t.Helper()
		req := fetchRequest(version, "sessions", 0, 0, 1<<20)
		req.SessionID, req.SessionEpoch = sessionID, epoch
		resp := roundTrip[*kmsg.FetchResponse](c.in(t), req)
		if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d (session %d, epoch %d): error %d, session %d, %d topics; want a full fetch with session 0",
				version, sessionID, epoch, resp.ErrorCode, resp.SessionID, len(resp.Topics))
		}
		records, err := decodeBatches(resp.Topics[0].Partitions[0].RecordBatches)
		if err != nil {
			t.Fatal(err)
		}
		assertRecords(t, records, "x", "y")
	}
	notFound := func(t *testing.T, version int16, sessionID, epoch int32) {
		t.Helper()
		req := fetchRequest(version, "sessions", 0, 0, 1<<20)
		req.SessionID, req.SessionEpoch = sessionID, epoch
		resp := roundTrip[*kmsg.FetchResponse](c.in(t), req)
		if resp.ErrorCode != protocol.FetchSessionIDNotFound.Code || resp.SessionID != 0 || len(resp.Topics) != 0 {
			t.Fatalf("v%d (session %d, epoch %d): error %d, session %d, %d topics; want FETCH_SESSION_ID_NOT_FOUND, 0, none",
				version, sessionID, epoch, resp.ErrorCode, resp.SessionID, len(resp.Topics))
		}
	}
	for _, version := range sessionFetchVersions() {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Run("sessionless, as kafka-go sends it", func(t *testing.T) { full(t, version, -1, -1) })
			t.Run("sessionless naming a session", func(t *testing.T) { full(t, version, 12345, -1) })
			t.Run("sessionless without id", func(t *testing.T) { full(t, version, 0, -1) })
			t.Run("new session", func(t *testing.T) { full(t, version, 0, 0) })
			t.Run("new session closing another", func(t *testing.T) { full(t, version, 12345, 0) })
			t.Run("incremental in unknown session", func(t *testing.T) { notFound(t, version, 12345, 1) })
			t.Run("incremental without id", func(t *testing.T) { notFound(t, version, 0, 1) })
			t.Run("negative epoch other than final", func(t *testing.T) { notFound(t, version, 12345, -2) })
		})
	}
}

// sessionFetchVersions is every served Fetch version that carries session fields.
func sessionFetchVersions() []int16 {
	var versions []int16
	for _, v := range fetchedVersions {
		if v >= 7 {
			versions = append(versions, v)
		}
	}
	return versions
}
