package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors returned by ParseRequest and ParseResponse. They are wrapped with details; test with errors.Is.
var (
	// ErrTruncated: the frame ends inside the header.
	ErrTruncated = errors.New("protocol: frame truncated")
	// ErrMalformed: the header's bytes cannot be a header (negative string length, overlong varint).
	ErrMalformed = errors.New("protocol: malformed header")
	// ErrUnknownAPIKey: the API key is not one kmsg knows, so the header's layout after the correlation
	// id is unknown. The returned header still holds the key, version and correlation id.
	ErrUnknownAPIKey = errors.New("protocol: unknown api key")
)

// ApiVersionsKey is the API key of ApiVersions, whose response header never carries tagged fields.
const ApiVersionsKey int16 = 18

// controlledShutdownKey is the API key of ControlledShutdown, whose v0 request has header v0.
const controlledShutdownKey int16 = 7

// RequestHeader is the part of a request that precedes the API-specific body.
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      *string // nil for a null client id and for header v0 (ControlledShutdown v0).
}

// Flexible reports whether the request and its response use KIP-482 flexible encoding (compact
// strings and arrays, tagged fields). False for unknown API keys.
func (h RequestHeader) Flexible() bool {
	flexible, _ := Flexible(h.APIKey, h.APIVersion)
	return flexible
}

// notFlexible marks an API that has no flexible version in firstFlexibleVersion.
const notFlexible = math.MaxInt16

// firstFlexibleVersion holds, per API key, the lowest flexible version according to kmsg: every API's
// flexibility is "version >= N" or "never". A key kmsg does not know holds -1. Built once at package
// initialisation and never written again, so it is safe for concurrent use.
var firstFlexibleVersion = buildFirstFlexibleVersions()

func buildFirstFlexibleVersions() [kmsg.MaxKey + 1]int16 {
	var table [kmsg.MaxKey + 1]int16
	for key := range table {
		table[key] = -1
		request := kmsg.RequestForKey(int16(key))
		if request == nil {
			continue
		}
		table[key] = notFlexible
		for version := int16(0); version <= request.MaxVersion(); version++ {
			request.SetVersion(version)
			if request.IsFlexible() {
				table[key] = version
				break
			}
		}
	}
	return table
}

// Flexible reports whether version apiVersion of API apiKey uses flexible encoding, and whether the
// key is known at all. Versions above kmsg's maximum follow the same rule as the ones below it, as in
// Kafka, where flexibility is an open-ended range ("9+").
func Flexible(apiKey, apiVersion int16) (flexible, known bool) {
	if apiKey < 0 || int(apiKey) >= len(firstFlexibleVersion) || firstFlexibleVersion[apiKey] < 0 {
		return false, false
	}
	return apiVersion >= firstFlexibleVersion[apiKey], true
}

// RequestHeaderVersion returns the request header version (0, 1 or 2) that a request of this API and
// version carries, and whether the key is known.
func RequestHeaderVersion(apiKey, apiVersion int16) (headerVersion int, known bool) {
	flexible, known := Flexible(apiKey, apiVersion)
	switch {
	case !known:
		return 0, false
	case apiKey == controlledShutdownKey && apiVersion == 0:
		return 0, true
	case flexible:
		return 2, true
	default:
		return 1, true
	}
}

// ResponseHeaderVersion returns the response header version (0 or 1) of the response to a request of
// this API and version, and whether the key is known. ApiVersions responses always use version 0, so
// that a client that does not yet know the broker's versions can read the error code.
func ResponseHeaderVersion(apiKey, apiVersion int16) (headerVersion int, known bool) {
	flexible, known := Flexible(apiKey, apiVersion)
	if flexible && apiKey != ApiVersionsKey {
		return 1, known
	}
	return 0, known
}

// ParseRequest splits a request frame (without its 4-byte size prefix) into its header and body.
// The body aliases frame.
//
// On error the header holds the fields read before the error; for ErrUnknownAPIKey that is the key,
// version and correlation id, enough to log or to answer. ParseRequest does not check the version
// against what the broker serves (see VersionTable) and never reads past the header.
func ParseRequest(frame []byte) (header RequestHeader, body []byte, err error) {
	const fixedSize = 8 // api key, api version, correlation id
	if len(frame) < fixedSize {
		return header, nil, fmt.Errorf("%w: request header needs %d bytes, frame has %d", ErrTruncated, fixedSize, len(frame))
	}
	header.APIKey = int16(binary.BigEndian.Uint16(frame[0:]))
	header.APIVersion = int16(binary.BigEndian.Uint16(frame[2:]))
	header.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[fixedSize:]

	headerVersion, known := RequestHeaderVersion(header.APIKey, header.APIVersion)
	if !known {
		return header, nil, fmt.Errorf("%w %d (version %d, correlation id %d)", ErrUnknownAPIKey, header.APIKey, header.APIVersion, header.CorrelationID)
	}
	if headerVersion == 0 {
		return header, rest, nil
	}

	// The client id is a classic nullable string (int16 length) even in header v2, so that a broker
	// can read it before knowing whether the client speaks flexible versions.
	if len(rest) < 2 {
		return header, nil, fmt.Errorf("%w: client id length needs 2 bytes, %d left", ErrTruncated, len(rest))
	}
	length := int(int16(binary.BigEndian.Uint16(rest)))
	rest = rest[2:]
	switch {
	case length < -1:
		return header, nil, fmt.Errorf("%w: client id length %d", ErrMalformed, length)
	case length > len(rest):
		return header, nil, fmt.Errorf("%w: client id of %d bytes, %d left", ErrTruncated, length, len(rest))
	case length >= 0:
		clientID := string(rest[:length])
		header.ClientID = &clientID
		rest = rest[length:]
	}

	if headerVersion == 2 {
		rest, err = skipTaggedFields(rest)
		if err != nil {
			return header, nil, fmt.Errorf("protocol: request header tagged fields: %w", err)
		}
	}
	return header, rest, nil
}

// AppendRequestHeader appends the header of h's API and version to dst: the counterpart of
// ParseRequest for clients (tests, replication). A flexible header gets an empty tagged-field
// section. An unknown API key is written as header v1.
//
// It panics if the client id is longer than an int16 length can say; that is a caller's bug.
func AppendRequestHeader(dst []byte, h RequestHeader) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.APIKey))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.APIVersion))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	headerVersion, known := RequestHeaderVersion(h.APIKey, h.APIVersion)
	if !known {
		headerVersion = 1
	}
	if headerVersion == 0 {
		return dst
	}
	if h.ClientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xFFFF) // -1: null
	} else {
		if len(*h.ClientID) > math.MaxInt16 {
			panic(fmt.Sprintf("protocol: client id of %d bytes exceeds the int16 length prefix", len(*h.ClientID)))
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*h.ClientID)))
		dst = append(dst, *h.ClientID...)
	}
	if headerVersion == 2 {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// skipTaggedFields skips a KIP-482 tagged-field section (uvarint count, then per field a uvarint tag,
// a uvarint size and size bytes) and returns what follows it. The header defines no tags, so their
// contents are ignored, as Kafka ignores unknown tags.
func skipTaggedFields(src []byte) ([]byte, error) {
	count, n, err := readUvarint32(src)
	if err != nil {
		return nil, fmt.Errorf("count: %w", err)
	}
	src = src[n:]
	// Each field takes at least two bytes, so a lying count fails on length, not on time.
	for i := uint32(0); i < count; i++ {
		_, n, err := readUvarint32(src)
		if err != nil {
			return nil, fmt.Errorf("field %d tag: %w", i, err)
		}
		src = src[n:]
		size, n, err := readUvarint32(src)
		if err != nil {
			return nil, fmt.Errorf("field %d size: %w", i, err)
		}
		src = src[n:]
		if uint64(size) > uint64(len(src)) {
			return nil, fmt.Errorf("%w: tagged field %d of %d bytes, %d left", ErrTruncated, i, size, len(src))
		}
		src = src[size:]
	}
	return src, nil
}

// readUvarint32 reads an unsigned varint of at most 32 bits (at most 5 bytes), as Kafka writes them.
func readUvarint32(src []byte) (value uint32, n int, err error) {
	var shift uint
	for n < len(src) {
		b := src[n]
		n++
		if n == 5 && b > 0x0F {
			return 0, 0, fmt.Errorf("%w: varint overflows 32 bits", ErrMalformed)
		}
		value |= uint32(b&0x7F) << shift
		if b < 0x80 {
			return value, n, nil
		}
		shift += 7
	}
	return 0, 0, fmt.Errorf("%w: varint cut off after %d bytes", ErrTruncated, len(src))
}
