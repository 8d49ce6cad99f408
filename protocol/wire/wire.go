// Package wire is a minimal Kafka client for tests: it writes and reads size-prefixed frames and turns
// kmsg requests into request frames and response frames back into kmsg responses. It has no
// connection management, no retries and no version negotiation: the test picks every version.
//
// A frame on the wire is a 4-byte big-endian size followed by that many bytes; the functions here that
// take or return a frame mean the bytes after the size.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrFrameTooLarge is returned by ReadFrame for a size prefix above the caller's limit.
var ErrFrameTooLarge = errors.New("wire: frame too large")

// WriteFrame writes frame behind its 4-byte size prefix, in one Write call.
func WriteFrame(w io.Writer, frame []byte) error {
	buffer := make([]byte, 0, 4+len(frame))
	buffer = binary.BigEndian.AppendUint32(buffer, uint32(len(frame)))
	buffer = append(buffer, frame...)
	if _, err := w.Write(buffer); err != nil {
		return fmt.Errorf("wire: write frame of %d bytes: %w", len(frame), err)
	}
	return nil
}

// ReadFrame reads one size-prefixed frame and returns the bytes after the size. It returns io.EOF if r
// ends before the first byte, io.ErrUnexpectedEOF (wrapped) if it ends inside the frame, and
// ErrFrameTooLarge if the size is negative or above maxSize.
func ReadFrame(r io.Reader, maxSize int) ([]byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("wire: read frame size: %w", err)
	}
	size := int32(binary.BigEndian.Uint32(prefix[:]))
	if size < 0 || int64(size) > int64(maxSize) {
		return nil, fmt.Errorf("%w: size %d, limit %d", ErrFrameTooLarge, size, maxSize)
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("wire: read frame of %d bytes: %w", size, err)
	}
	return frame, nil
}

// EncodeRequest returns the request frame (header and body, no size prefix) for req at its current
// version (req.SetVersion first). The client id is sent as a non-null string, except in
// ControlledShutdown v0, whose header has none.
func EncodeRequest(correlationID int32, clientID string, req kmsg.Request) []byte {
	header := protocol.RequestHeader{
		APIKey:        req.Key(),
		APIVersion:    req.GetVersion(),
		CorrelationID: correlationID,
		ClientID:      &clientID,
	}
	return req.AppendTo(protocol.AppendRequestHeader(nil, header))
}

// DecodeResponse decodes a response frame (no size prefix) to req, at req's version. Use
// CorrelationID to check which request a frame answers.
//
// An ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0, as Kafka encodes it (and as
// clients read it). It returns an error if the body is shorter or longer than the response it
// decodes to: a broker that encodes at the wrong version or appends junk is caught here.
func DecodeResponse(frame []byte, req kmsg.Request) (kmsg.Response, error) {
	_, body, err := protocol.ParseResponse(frame, req.Key(), req.GetVersion())
	if err != nil {
		return nil, fmt.Errorf("wire: %w", err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if req.Key() == protocol.ApiVersionsKey && len(body) >= 2 &&
		int16(binary.BigEndian.Uint16(body)) == protocol.UnsupportedVersion.Code {
		resp.SetVersion(0)
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("wire: decode %s v%d response: %w", kmsg.NameForKey(req.Key()), resp.GetVersion(), err)
	}
	// kmsg ignores trailing bytes; encoding the decoded response again tells how many it used.
	if used := len(resp.AppendTo(nil)); used != len(body) {
		return nil, fmt.Errorf("wire: %s v%d response body has %d bytes, the decoded response %d",
			kmsg.NameForKey(req.Key()), resp.GetVersion(), len(body), used)
	}
	return resp, nil
}

// CorrelationID returns the correlation id at the start of a response frame.
func CorrelationID(frame []byte) (int32, error) {
	if len(frame) < 4 {
		return 0, fmt.Errorf("wire: response frame of %d bytes has no correlation id", len(frame))
	}
	return int32(binary.BigEndian.Uint32(frame)), nil
}
