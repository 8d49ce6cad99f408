package broker

import (
	"bytes"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/netpoll"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/reqtime"
)

// request is one request being handled.
type request struct {
	header   protocol.RequestHeader
	session  *session
	res      *netpoll.Responder
	received time.Time
	metrics  *apiMetrics
	// amend adds what the authorizer took out of the request back into the response, as refusals
	// (authorize.go); respond applies it.
	amend []func(kmsg.Response)
	// deniedFetch are the fetch topics the authorizer refused, answered by respondFetch.
	deniedFetch []fetchTopicResult

	// Stage timings, slow-request log and tracing (request_timing.go, request_trace.go).
	size          int // request frame bytes
	timeline      reqtime.Timeline
	readBegun     time.Time // a fetch: when the read that answers it began
	sendBegun     time.Time
	trace         *requestTrace // nil unless the request is sampled for tracing
	followerFetch bool          // a replica's fetch: kept out of the fetch stage histograms
	hadErrors     atomic.Bool
}

// respond encodes resp at the request's version and sends it.
func (r *request) respond(resp kmsg.Response) {
	for _, amend := range r.amend {
		amend(resp)
	}
	r.send(netpoll.Chunk{Bytes: protocol.EncodeResponse(nil, r.header, resp)})
}

// send sends a response made of chunks, the first of which must start with the response header.
func (r *request) send(chunks ...netpoll.Chunk) {
	r.metrics.seconds.UpdateDuration(r.received)
	r.sendBegun = time.Now()
	r.res.SendNotify(r, chunks...) // ResponseDone: request_timing.go
}

// skip completes the request without a response (acks=0).
func (r *request) skip() {
	r.metrics.seconds.UpdateDuration(r.received)
	r.res.Skip()
	r.session.broker.timing.complete(r, time.Now())
}

// failed counts a request that answered an error.
func (r *request) failed() {
	r.metrics.errors.Inc()
	r.hadErrors.Store(true)
}

// handlerFunc handles one decoded request.
type handlerFunc func(b *Broker, r *request, req kmsg.Request)

type apiEntry struct {
	versions protocol.VersionRange
	handle   handlerFunc
}

type apiTable struct {
	entries  map[int16]apiEntry
	versions protocol.VersionTable
}

// typed adapts a handler of one concrete request type.
func typed[T kmsg.Request](fn func(b *Broker, r *request, req T)) handlerFunc {
	return func(b *Broker, r *request, req kmsg.Request) { fn(b, r, req.(T)) }
}

// newAPITable lists what the broker serves. Minimum versions are as low as the codec decodes:
// librdkafka enables features only when the advertised range reaches its old minimums.
func newAPITable() apiTable {
	entries := map[int16]apiEntry{
		0:  {protocol.VersionRange{Min: 3, Max: 13}, typed((*Broker).handleProduce)},
		1:  {protocol.VersionRange{Min: 4, Max: 18}, typed((*Broker).handleFetch)},
		2:  {protocol.VersionRange{Min: 0, Max: 7}, typed((*Broker).handleListOffsets)},
		3:  {protocol.VersionRange{Min: 0, Max: 12}, typed((*Broker).handleMetadata)},
		8:  {protocol.VersionRange{Min: 0, Max: 8}, typed((*Broker).handleOffsetCommit)},
		9:  {protocol.VersionRange{Min: 0, Max: 8}, typed((*Broker).handleOffsetFetch)},
		10: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleFindCoordinator)},
		11: {protocol.VersionRange{Min: 0, Max: 9}, typed((*Broker).handleJoinGroup)},
		12: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleHeartbeat)},
		13: {protocol.VersionRange{Min: 0, Max: 5}, typed((*Broker).handleLeaveGroup)},
		14: {protocol.VersionRange{Min: 0, Max: 5}, typed((*Broker).handleSyncGroup)},
		15: {protocol.VersionRange{Min: 0, Max: 5}, typed((*Broker).handleDescribeGroups)},
		16: {protocol.VersionRange{Min: 0, Max: 5}, typed((*Broker).handleListGroups)},
		17: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleSaslHandshake)},
		18: {protocol.VersionRange{Min: 0, Max: 4}, nil}, // ApiVersions: answered before decoding
		19: {protocol.VersionRange{Min: 0, Max: 7}, typed((*Broker).handleCreateTopics)},
		20: {protocol.VersionRange{Min: 0, Max: 6}, typed((*Broker).handleDeleteTopics)},
		21: {protocol.VersionRange{Min: 0, Max: 2}, typed((*Broker).handleDeleteRecords)},
		22: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleInitProducerID)}, // librdkafka needs Min 0 for idempotence
		23: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleOffsetForLeaderEpoch)},
		24: {protocol.VersionRange{Min: 0, Max: 5}, typed((*Broker).handleAddPartitionsToTxn)},
		25: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleAddOffsetsToTxn)},
		26: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleEndTxn)},
		27: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleWriteTxnMarkers)},
		28: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleTxnOffsetCommit)},
		29: {protocol.VersionRange{Min: 0, Max: 3}, typed((*Broker).handleDescribeAcls)},
		30: {protocol.VersionRange{Min: 0, Max: 3}, typed((*Broker).handleCreateAcls)},
		31: {protocol.VersionRange{Min: 0, Max: 3}, typed((*Broker).handleDeleteAcls)},
		32: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleDescribeConfigs)},
		33: {protocol.VersionRange{Min: 0, Max: 2}, typed((*Broker).handleAlterConfigs)},
		35: {protocol.VersionRange{Min: 0, Max: 4}, typed((*Broker).handleDescribeLogDirs)},
		36: {protocol.VersionRange{Min: 0, Max: 2}, typed((*Broker).handleSaslAuthenticate)},
		37: {protocol.VersionRange{Min: 0, Max: 3}, typed((*Broker).handleCreatePartitions)},
		42: {protocol.VersionRange{Min: 0, Max: 2}, typed((*Broker).handleDeleteGroups)},
		43: {protocol.VersionRange{Min: 0, Max: 2}, typed((*Broker).handleElectLeaders)},
		44: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleIncrementalAlterConfigs)},
		47: {protocol.VersionRange{Min: 0, Max: 0}, typed((*Broker).handleOffsetDelete)},
		48: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleDescribeClientQuotas)},
		49: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleAlterClientQuotas)},
		50: {protocol.VersionRange{Min: 0, Max: 0}, typed((*Broker).handleDescribeUserScramCredentials)},
		51: {protocol.VersionRange{Min: 0, Max: 0}, typed((*Broker).handleAlterUserScramCredentials)},
		60: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleDescribeCluster)},
		61: {protocol.VersionRange{Min: 0, Max: 0}, typed((*Broker).handleDescribeProducers)},
		65: {protocol.VersionRange{Min: 0, Max: 0}, typed((*Broker).handleDescribeTransactions)},
		66: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleListTransactions)},
		68: {protocol.VersionRange{Min: 1, Max: 1}, typed((*Broker).handleConsumerGroupHeartbeat)},
		69: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleConsumerGroupDescribe)},
		76: {protocol.VersionRange{Min: 1, Max: 1}, typed((*Broker).handleShareGroupHeartbeat)},
		77: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleShareGroupDescribe)},
		78: {protocol.VersionRange{Min: 1, Max: 2}, typed((*Broker).handleShareFetch)},
		79: {protocol.VersionRange{Min: 1, Max: 2}, typed((*Broker).handleShareAcknowledge)},
		90: {protocol.VersionRange{Min: 0, Max: 1}, typed((*Broker).handleDescribeShareGroupOffsets)},
		91: {protocol.VersionRange{Min: 0, Max: 0}, typed((*Broker).handleAlterShareGroupOffsets)},
		92: {protocol.VersionRange{Min: 0, Max: 0}, typed((*Broker).handleDeleteShareGroupOffsets)},
	}
	served := make(map[int16]protocol.VersionRange, len(entries))
	for key, e := range entries {
		served[key] = e.versions
	}
	versions, err := protocol.NewVersionTable(served)
	if err != nil {
		panic("broker: served API table rejected by the codec: " + err.Error())
	}
	return apiTable{entries: entries, versions: versions}
}

// handle parses and dispatches one request; it runs on the connection's worker goroutine.
func (b *Broker) handle(s *session, q queuedRequest) {
	if s.rawSASLToken() {
		b.handleRawSASLToken(s, q) // after SaslHandshake v0 the frame is a bare token
		return
	}
	header, body, err := protocol.ParseRequest(q.frame)
	r := &request{header: header, session: s, res: q.res, received: q.received, metrics: b.metrics.api(header.APIKey)}
	r.metrics.requests.Inc()
	b.timing.begin(r, len(q.frame))
	if err != nil {
		// Kafka closes a connection whose request it cannot parse or whose API it does not know.
		b.badRequestLog.Warn("closing connection: unparsable request", "remote", s.conn.RemoteAddr(), "api_key", header.APIKey, "err", err)
		r.failed()
		r.skip()
		s.conn.Close()
		return
	}
	if !b.admitAuthenticated(r) {
		return
	}
	if header.APIKey == protocol.ApiVersionsKey {
		b.handleApiVersions(r, body)
		return
	}
	entry, served := b.apis.entries[header.APIKey]
	req := kmsg.RequestForKey(header.APIKey)
	if req == nil {
		b.closeFor(r, "unknown api key")
		return
	}
	req.SetVersion(header.APIVersion)
	if served && !entry.versions.Contains(header.APIVersion) {
		b.closeFor(r, "unsupported api version")
		return
	}
	if err := req.ReadFrom(body); err != nil {
		b.closeFor(r, "malformed request body: "+err.Error())
		return
	}
	if !served {
		b.answerUnserved(r, req)
		return
	}
	if !b.authorizeRequest(r, req) {
		return // refused and answered (authorize.go)
	}
	entry.handle(b, r, req)
}

func (b *Broker) closeFor(r *request, reason string) {
	b.badRequestLog.Warn("closing connection", "remote", r.session.conn.RemoteAddr(), "api", kmsg.NameForKey(r.header.APIKey),
		"api_key", r.header.APIKey, "version", r.header.APIVersion, "reason", reason)
	r.failed()
	r.skip()
	r.session.conn.Close()
}

// answerUnserved answers a request kind the broker does not serve (and does not advertise) with
// UNSUPPORTED_VERSION in the response's top-level error code. Responses without one at the
// request's version cannot carry the refusal, so the connection is closed instead, as Kafka does for
// what it cannot answer.
func (b *Broker) answerUnserved(r *request, req kmsg.Request) {
	resp := req.ResponseKind()
	field := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !field.IsValid() || field.Kind() != reflect.Int16 {
		b.closeFor(r, "api not served")
		return
	}
	// Some responses have the field only at some versions (FindCoordinator v0-v3, OffsetFetch v2-v7):
	// where it is not encoded, the answer would read as a success.
	resp.SetVersion(r.header.APIVersion)
	withoutCode := resp.AppendTo(nil)
	field.SetInt(int64(protocol.UnsupportedVersion.Code))
	if bytes.Equal(withoutCode, resp.AppendTo(nil)) {
		b.closeFor(r, "api not served, and its response has no error code at this version")
		return
	}
	r.failed()
	r.respond(resp)
}

// handleApiVersions serves ApiVersions v0-v4. An unsupported version is answered with a v0 body,
// UNSUPPORTED_VERSION and the served ApiVersions range, without decoding the request (KIP-511);
// v3+ client software names outside Kafka's pattern get INVALID_REQUEST.
func (b *Broker) handleApiVersions(r *request, body []byte) {
	code := int16(0)
	if b.apis.versions.Supports(protocol.ApiVersionsKey, r.header.APIVersion) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(r.header.APIVersion)
		if err := req.ReadFrom(body); err != nil {
			code = protocol.InvalidRequest.Code
		} else {
			code = protocol.CodeFor(protocol.ValidateApiVersionsRequest(req))
		}
	}
	if code != 0 || !b.apis.versions.Supports(protocol.ApiVersionsKey, r.header.APIVersion) {
		r.failed()
	}
	r.send(netpoll.Chunk{Bytes: protocol.AppendApiVersionsResponse(nil, r.header, b.apis.versions, 0, code)})
}
