package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AppendResponseHeader appends the response header for request h: the correlation id, then, for a
// flexible version of any API but ApiVersions, an empty tagged-field section (one 0 byte).
func AppendResponseHeader(dst []byte, h RequestHeader) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if headerVersion, _ := ResponseHeaderVersion(h.APIKey, h.APIVersion); headerVersion == 1 {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// EncodeResponse appends the response to request h: the response header, then resp encoded at the
// request's version (EncodeResponse sets resp's version). The 4-byte size prefix is the network
// layer's.
//
// An ApiVersions request of a version the broker does not serve is answered with
// AppendApiVersionsResponse, which encodes a v0 body whatever the request's version.
//
// It panics if resp is not the response kind of h's API: such a frame would desynchronise the client.
func EncodeResponse(dst []byte, h RequestHeader, resp kmsg.Response) []byte {
	if resp.Key() != h.APIKey {
		panic(fmt.Sprintf("protocol: response of api key %d answers a request of api key %d", resp.Key(), h.APIKey))
	}
	resp.SetVersion(h.APIVersion)
	dst = AppendResponseHeader(dst, h)
	return resp.AppendTo(dst)
}

// ParseResponse splits a response frame (without its size prefix) to a request of the given API and
// version into correlation id and body: the client side of AppendResponseHeader. The body aliases
// frame. An unknown API key is read as response header v0 and reported with ErrUnknownAPIKey.
func ParseResponse(frame []byte, apiKey, apiVersion int16) (correlationID int32, body []byte, err error) {
	if len(frame) < 4 {
		return 0, nil, fmt.Errorf("%w: response header needs 4 bytes, frame has %d", ErrTruncated, len(frame))
	}
	correlationID = int32(binary.BigEndian.Uint32(frame))
	body = frame[4:]
	headerVersion, known := ResponseHeaderVersion(apiKey, apiVersion)
	if !known {
		return correlationID, body, fmt.Errorf("%w %d (version %d)", ErrUnknownAPIKey, apiKey, apiVersion)
	}
	if headerVersion == 1 {
		body, err = skipTaggedFields(body)
		if err != nil {
			return correlationID, nil, fmt.Errorf("protocol: response header tagged fields: %w", err)
		}
	}
	return correlationID, body, nil
}
