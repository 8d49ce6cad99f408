package protocol_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/protocol/wire"
)

// The wire test client's own tests live here so that `go test ./protocol/` runs them.

func TestWireFrames(t *testing.T) {
	var stream bytes.Buffer
	frames := [][]byte{{}, []byte("one"), bytes.Repeat([]byte{7}, 1000)}
	for _, frame := range frames {
		if err := wire.WriteFrame(&stream, frame); err != nil {
			t.Fatal(err)
		}
	}
	if stream.Len() != 4*3+3+1000 {
		t.Fatalf("stream of %d bytes", stream.Len())
	}
	for _, want := range frames {
		got, err := wire.ReadFrame(&stream, 1000)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadFrame = %x, %v; want %x", got, err, want)
		}
	}
	if _, err := wire.ReadFrame(&stream, 1000); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}

	readErr := func(stream []byte, maxSize int) error {
		_, err := wire.ReadFrame(bytes.NewReader(stream), maxSize)
		return err
	}
	if err := readErr([]byte{0, 0}, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut size prefix: %v", err)
	}
	if err := readErr([]byte{0, 0, 0, 3, 'a'}, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut frame: %v", err)
	}
	if err := readErr([]byte{0, 0, 0, 3}, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("frame missing: %v", err)
	}
	if err := readErr([]byte{0, 0, 0, 11}, 10); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if err := readErr([]byte{0xFF, 0xFF, 0xFF, 0xFF}, 10); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("negative size: %v", err)
	}
}

// TestWireOverPipe runs one request/response exchange over a synchronous in-memory connection, the
// way a broker test would over TCP.
func TestWireOverPipe(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	table := notesTable(t)
	served := make(chan error, 1)
	go func() {
		defer server.Close()
		frame, err := wire.ReadFrame(server, 1<<20)
		if err != nil {
			served <- err
			return
		}
		header, _, err := protocol.ParseRequest(frame)
		if err != nil {
			served <- err
			return
		}
		served <- wire.WriteFrame(server, protocol.AppendApiVersionsResponse(nil, header, table, 0, 0))
	}()

	request := kmsg.NewPtrApiVersionsRequest()
	request.SetVersion(3)
	request.ClientSoftwareName, request.ClientSoftwareVersion = "test", "1"
	if err := wire.WriteFrame(client, wire.EncodeRequest(11, "pipe", request)); err != nil {
		t.Fatal(err)
	}
	frame, err := wire.ReadFrame(client, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if id, _ := wire.CorrelationID(frame); id != 11 {
		t.Errorf("correlation id %d", id)
	}
	response, err := wire.DecodeResponse(frame, request)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(response.(*kmsg.ApiVersionsResponse).ApiKeys); got != len(table.APIKeys()) {
		t.Errorf("%d APIs advertised", got)
	}
}

func TestWireDecodeResponseRefusesBadBodies(t *testing.T) {
	request := kmsg.NewPtrFindCoordinatorRequest()
	request.SetVersion(3) // flexible
	header := protocol.RequestHeader{APIKey: 10, APIVersion: 3, CorrelationID: 1}
	response := kmsg.NewPtrFindCoordinatorResponse()
	response.Host = "127.0.0.1"
	frame := protocol.EncodeResponse(nil, header, response)

	if _, err := wire.DecodeResponse(frame, request); err != nil {
		t.Fatalf("good frame: %v", err)
	}
	if _, err := wire.DecodeResponse(append(frame, 0xFF), request); err == nil {
		t.Error("trailing byte accepted")
	}
	if _, err := wire.DecodeResponse(frame[:len(frame)-3], request); err == nil {
		t.Error("truncated body accepted")
	}
	// The same body behind a header without the tag byte, as a broker that forgot it would send.
	withoutTag := append(append([]byte(nil), frame[:4]...), frame[5:]...)
	if _, err := wire.DecodeResponse(withoutTag, request); err == nil {
		t.Error("missing response header tag byte accepted")
	}
	if _, err := wire.DecodeResponse([]byte{0, 0}, request); err == nil {
		t.Error("two-byte frame accepted")
	}
	if _, err := wire.CorrelationID([]byte{0, 0}); err == nil {
		t.Error("CorrelationID of two bytes")
	}
}
