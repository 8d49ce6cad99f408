// Package protocol is Kafka's framing as the broker sees it: request headers in, response headers
// out, which API versions are flexible, the table of served versions and the ApiVersions answer, and
// Kafka's error codes. It holds no sockets, topics or handlers; request and response bodies are kmsg
// types (github.com/twmb/franz-go/pkg/kmsg), which this package frames. Subpackage wire is a raw-frame
// client for tests.
//
// # Frames
//
// Every request and response travels as a 4-byte big-endian size followed by that many bytes. The
// network layer reads and writes the size; everything here works on the bytes after it ("frame").
//
// # Request header
//
// Request header v1 (every request of a non-flexible version, except ControlledShutdown v0):
//
//	offset  size  field
//	0       2     api key          int16
//	2       2     api version      int16
//	4       4     correlation id   int32
//	8       2     client id length int16, -1 = null
//	10      n     client id        n = client id length bytes (none when null)
//	10+n    ...   request body
//
// Request header v2 (flexible versions, KIP-482): v1, then a tagged-field section. The client id
// stays a classic int16-length string, not a compact one, so a broker can read it before it knows
// whether the client speaks flexible versions.
//
//	offset  size  field
//	0       8     api key, api version, correlation id, as in v1
//	8       2+n   client id, as in v1
//	10+n    k     tagged fields    uvarint count, then per field uvarint tag, uvarint size, bytes;
//	              k = 1 (a single 0 byte) when there are none, as every client sends
//	10+n+k  ...   request body
//
// Request header v0 has only the first 8 bytes; only ControlledShutdown v0 (api key 7) uses it, and
// ParseRequest handles it.
//
// # Response header
//
//	offset  size  field
//	0       4     correlation id   int32, copied from the request
//	4       1     tagged fields    v1 only: 0 (none)
//	4 or 5  ...   response body, at the request's version
//
// Response header v1 is used for flexible versions of every API except ApiVersions, whose response
// header is always v0: a client that sent a version the broker does not know must still find the
// error code at offset 4. ApiVersions requests, by contrast, do use header v2 from v3 on.
//
// # Invariants
//
//   - Flexibility is a property of (api key, version) and is "version >= N" or "never" for each API;
//     request, request header, response and response header of one exchange agree on it (except the
//     ApiVersions response header above). The table comes from kmsg, so the codec and the header
//     parser cannot disagree.
//   - ParseRequest never panics and never reads beyond the header: the body it returns is a suffix of
//     the frame. It does not judge the version; the broker checks VersionTable.Supports and, as Kafka
//     does, closes the connection for an unsupported version of anything but ApiVersions.
//   - An ApiVersions request of an unsupported version is answered without parsing its body, with a v0
//     body carrying UNSUPPORTED_VERSION (35) and ApiVersions' own served range (KIP-511).
//   - Every version a VersionTable advertises is one kmsg can encode and decode.
//   - Error codes are comparable values that implement error; CodeFor finds one in a wrapped chain.
package protocol
