package protocol

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is an inclusive range of versions of one API.
type VersionRange struct {
	Min, Max int16
}

// Contains reports whether Min <= version <= Max.
func (r VersionRange) Contains(version int16) bool {
	return r.Min <= version && version <= r.Max
}

// VersionTable lists the APIs a broker serves and the versions of each: what ApiVersions advertises
// and what the broker checks each request against. The broker decides its contents; build one with
// NewVersionTable. A VersionTable is immutable and safe for concurrent use. The zero VersionTable
// serves nothing.
type VersionTable struct {
	// ranges is indexed by API key.
	// Invariant: a served key has 0 <= Min <= Max <= kmsg's MaxVersion for that key; a key that is not
	// served has the empty range {0, -1}.
	ranges []VersionRange
}

// NewVersionTable builds the table of served APIs from a map of API key to version range. Every
// key must be one kmsg knows, every range must satisfy 0 <= Min <= Max <= the highest version kmsg
// can encode for that key (so that every advertised version can be decoded), and ApiVersions (18)
// must be present.
//
// Advertise the lowest version the broker can decode, not just the versions clients pick: librdkafka
// enables features by checking that the advertised range overlaps fixed old versions.
func NewVersionTable(served map[int16]VersionRange) (VersionTable, error) {
	if _, ok := served[ApiVersionsKey]; !ok {
		return VersionTable{}, fmt.Errorf("protocol: version table does not serve ApiVersions (key %d)", ApiVersionsKey)
	}
	highestKey := int16(-1)
	for key, versions := range served {
		request := kmsg.RequestForKey(key)
		if request == nil {
			return VersionTable{}, fmt.Errorf("protocol: version table: unknown api key %d", key)
		}
		if versions.Min < 0 || versions.Min > versions.Max || versions.Max > request.MaxVersion() {
			return VersionTable{}, fmt.Errorf("protocol: version table: %s (key %d) range [%d, %d] is not within [0, %d]",
				kmsg.NameForKey(key), key, versions.Min, versions.Max, request.MaxVersion())
		}
		highestKey = max(highestKey, key)
	}
	ranges := make([]VersionRange, int(highestKey)+1)
	for key := range ranges {
		ranges[key] = VersionRange{Min: 0, Max: -1}
	}
	for key, versions := range served {
		ranges[key] = versions
	}
	return VersionTable{ranges: ranges}, nil
}

// Supports reports whether the table serves version apiVersion of API apiKey.
func (t VersionTable) Supports(apiKey, apiVersion int16) bool {
	versions, ok := t.Range(apiKey)
	return ok && versions.Contains(apiVersion)
}

// Range returns the versions served of API apiKey, and false if the API is not served.
func (t VersionTable) Range(apiKey int16) (VersionRange, bool) {
	if apiKey < 0 || int(apiKey) >= len(t.ranges) || t.ranges[apiKey].Max < 0 {
		return VersionRange{}, false
	}
	return t.ranges[apiKey], true
}

// APIKeys returns the served API keys in ascending order.
func (t VersionTable) APIKeys() []int16 {
	var keys []int16
	for key := range t.ranges {
		if t.ranges[key].Max >= 0 {
			keys = append(keys, int16(key))
		}
	}
	return slices.Clip(keys)
}

// AppendApiVersionsResponse appends the whole response (header and body, no size prefix) to the
// ApiVersions request h:
//
//   - If the table does not serve h's version of ApiVersions: a response header without tag byte and
//     a v0 body with error 35 UNSUPPORTED_VERSION listing only ApiVersions' own range, so the client
//     can retry with a version both sides know (KIP-511). Build this without parsing the request body,
//     whose layout at an unknown version is unknown; errorCode and throttleMillis are not used.
//   - Otherwise, with errorCode 0: the response at h's version listing every served API.
//   - Otherwise (for example INVALID_REQUEST from ValidateApiVersionsRequest): the response at h's
//     version with that error and no APIs, as Kafka answers.
//
// The ApiVersions response header never has a tag byte, even at flexible versions. It panics if h is
// not an ApiVersions request.
func AppendApiVersionsResponse(dst []byte, h RequestHeader, table VersionTable, throttleMillis int32, errorCode int16) []byte {
	if h.APIKey != ApiVersionsKey {
		panic(fmt.Sprintf("protocol: ApiVersions response to a request of api key %d", h.APIKey))
	}
	response := kmsg.NewApiVersionsResponse()
	own, served := table.Range(ApiVersionsKey)
	if !served || !own.Contains(h.APIVersion) {
		response.Version = 0
		response.ErrorCode = UnsupportedVersion.Code
		if served {
			response.ApiKeys = []kmsg.ApiVersionsResponseApiKey{apiVersionsEntry(ApiVersionsKey, own)}
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
		return response.AppendTo(dst)
	}

	response.Version = h.APIVersion
	response.ErrorCode = errorCode
	response.ThrottleMillis = throttleMillis
	if errorCode == None.Code {
		for key, versions := range table.ranges {
			if versions.Max >= 0 {
				response.ApiKeys = append(response.ApiKeys, apiVersionsEntry(int16(key), versions))
			}
		}
	}
	dst = AppendResponseHeader(dst, h)
	return response.AppendTo(dst)
}

func apiVersionsEntry(key int16, versions VersionRange) kmsg.ApiVersionsResponseApiKey {
	entry := kmsg.NewApiVersionsResponseApiKey()
	entry.ApiKey = key
	entry.MinVersion = versions.Min
	entry.MaxVersion = versions.Max
	return entry
}
