package main

import (
	"encoding/binary"
	"io"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// saslConn is a SASL/PLAIN-authenticated connection that sends requests at chosen versions, so
// that the test sees each API's own answer rather than a client library's routing and retries.
type saslConn struct {
	t         *testing.T
	conn      net.Conn
	formatter *kmsg.RequestFormatter
	next      int32
	served    map[int16]int16
}

func dialSASL(t *testing.T, address, user, password string) *saslConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", address, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &saslConn{t: t, conn: conn, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("matrix")), served: map[int16]int16{}}
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version, versions.ClientSoftwareName, versions.ClientSoftwareVersion = 3, "matrix", "1"
	for _, k := range c.do(versions).(*kmsg.ApiVersionsResponse).ApiKeys {
		c.served[k.ApiKey] = k.MaxVersion
	}
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Version, handshake.Mechanism = 1, "PLAIN"
	if code := c.do(handshake).(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		t.Fatalf("handshake: %d", code)
	}
	authenticate := kmsg.NewPtrSASLAuthenticateRequest()
	authenticate.Version, authenticate.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+password)
	if code := c.do(authenticate).(*kmsg.SASLAuthenticateResponse).ErrorCode; code != 0 {
		t.Fatalf("authenticate %s: %d", user, code)
	}
	return c
}

// do sends req at its version (or, at version 0 for an API served beyond it, at the highest
// version both kmsg and the broker speak) and decodes the answer.
func (c *saslConn) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	if req.GetVersion() == 0 && req.Key() != 18 {
		req.SetVersion(min(req.MaxVersion(), c.served[req.Key()]))
	}
	c.next++
	if _, err := c.conn.Write(c.formatter.AppendRequest(nil, req, c.next)); err != nil {
		c.t.Fatal(err)
	}
	c.conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		c.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.conn, frame); err != nil {
		c.t.Fatal(err)
	}
	_, body, err := protocol.ParseResponse(frame, req.Key(), req.GetVersion())
	if err != nil {
		c.t.Fatal(err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("%s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// errorCodes collects every ErrorCode in a response, however nested.
func errorCodes(v reflect.Value, out []int16) []int16 {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			out = errorCodes(v.Elem(), out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 {
				out = append(out, int16(v.Field(i).Int()))
				continue
			}
			out = errorCodes(v.Field(i), out)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Uint8 {
			for i := range v.Len() {
				out = errorCodes(v.Index(i), out)
			}
		}
	}
	return out
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
