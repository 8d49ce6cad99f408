package netpoll

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestFileChunkArrivesByteExactThroughSendfile(t *testing.T) {
	file, content := tempFile(t, 6<<20, 1)
	done := make(chan error, 1)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		res.SendThen(func(err error) { done <- err },
			Chunk{Bytes: frame},
			Chunk{File: file, FileOffset: 1000, FileLength: int64(len(content)) - 2000})
	}}
	server := startServer(t, testConfig(t), handler)
	client := dial(t, server)
	client.send([]byte("fetch:"))
	want := append([]byte("fetch:"), content[1000:len(content)-1000]...)
	if got := client.mustReadFrame(); !bytes.Equal(got, want) {
		t.Fatalf("response of %d bytes differs from the %d expected", len(got), len(want))
	}
	if err := <-done; err != nil {
		t.Fatalf("done: %v", err)
	}
	if server.SendfileBytes() == 0 {
		t.Fatal("sendfile counter did not rise")
	}
	if got := server.SendfileBytes() + server.CopiedFileBytes(); got != uint64(len(content)-2000) {
		t.Fatalf("sendfile %d + copied %d != file bytes %d", server.SendfileBytes(), server.CopiedFileBytes(), len(content)-2000)
	}
}

// TestMixedChunksBehindQueuedOutputStayOrdered sends a byte chunk far larger than the socket
// buffers, so gnet queues most of it, and file chunks right behind it: they must take the
// page-cache copy path and still come out in order.
func TestMixedChunksBehindQueuedOutputStayOrdered(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBufferedOutboundBytes = 48 << 20 // room to copy the file ranges behind the big chunk
	file, content := tempFile(t, 4<<20, 2)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	responses := [][]Chunk{
		{{Bytes: big}, {File: file, FileLength: 4 << 20}, {Bytes: []byte("middle")}, {File: file, FileOffset: 1 << 20, FileLength: 2 << 20}},
		{{File: file, FileOffset: 3, FileLength: 3 << 20}},
		{{Bytes: []byte("tail")}},
	}
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		res.Send(responses[frame[0]]...)
	}}
	server := startServer(t, cfg, handler)
	client := dial(t, server)
	_ = client.conn.SetReadBuffer(64 << 10)
	client.write(append(append(frame([]byte{0}), frame([]byte{1})...), frame([]byte{2})...))

	for i, chunks := range responses {
		var want []byte
		for _, chunk := range chunks {
			if chunk.File != nil {
				want = append(want, content[chunk.FileOffset:chunk.FileOffset+chunk.FileLength]...)
			} else {
				want = append(want, chunk.Bytes...)
			}
		}
		if got := client.mustReadFrame(); !bytes.Equal(got, want) {
			t.Fatalf("response %d: %d bytes differ from the %d expected", i, len(got), len(want))
		}
	}
	if server.CopiedFileBytes() == 0 {
		t.Fatal("file chunks behind queued output did not take the copy path")
	}
	fileBytes := uint64(4<<20 + 2<<20 + 3<<20)
	if got := server.SendfileBytes() + server.CopiedFileBytes(); got != fileBytes {
		t.Fatalf("sendfile %d + copied %d != file bytes %d", server.SendfileBytes(), server.CopiedFileBytes(), fileBytes)
	}
	if got := cfg.Metrics.GetOrCreateCounter("sluice_net_copied_file_bytes_total").Get(); got != server.CopiedFileBytes() {
		t.Fatalf("copied metric %d != accessor %d", got, server.CopiedFileBytes())
	}
}

// TestSlowReaderParksOutputAndResumes keeps the outbound cap tiny so output stalls over and
// over on the writability watcher, across many pipelined responses mixing bytes and files.
func TestSlowReaderParksOutputAndResumes(t *testing.T) {
	const requests = 24
	cfg := testConfig(t)
	cfg.MaxBufferedOutboundBytes = 64 << 10
	cfg.MaxInFlightRequests = requests
	file, content := tempFile(t, 3<<20, 3)
	response := func(i int) []Chunk {
		offset := int64(i) * 100_000
		return []Chunk{
			{Bytes: fmt.Appendf(nil, "response %d:", i)},
			{File: file, FileOffset: offset, FileLength: 512<<10 + int64(i)},
			{Bytes: bytes.Repeat([]byte{byte(i)}, 100_000)},
			{File: file, FileOffset: offset / 2, FileLength: 7},
		}
	}
	pending := make(chan *pendingRequest, requests)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		pending <- &pendingRequest{frame: frame, res: res}
	}}
	server := startServer(t, cfg, handler)
	client := dial(t, server)
	_ = client.conn.SetReadBuffer(32 << 10)
	for i := range requests {
		client.send([]byte{byte(i)})
	}
	// Answer from other goroutines in reverse order.
	collected := make([]*pendingRequest, requests)
	for i := range requests {
		collected[i] = <-pending
	}
	for i := requests - 1; i >= 0; i-- {
		go collected[i].res.Send(response(int(collected[i].frame[0]))...)
	}
	for i := range requests {
		var want []byte
		for _, chunk := range response(i) {
			if chunk.File != nil {
				want = append(want, content[chunk.FileOffset:chunk.FileOffset+chunk.FileLength]...)
			} else {
				want = append(want, chunk.Bytes...)
			}
		}
		if got := client.mustReadFrame(); !bytes.Equal(got, want) {
			t.Fatalf("response %d: %d bytes differ from the %d expected", i, len(got), len(want))
		}
	}
	if parks := cfg.Metrics.GetOrCreateCounter("sluice_net_output_parks_total").Get(); parks == 0 {
		t.Fatal("output never parked on the writability watcher")
	}
}

func TestFileShorterThanPromisedClosesConnection(t *testing.T) {
	file, content := tempFile(t, 1<<20, 4)
	done := make(chan error, 1)
	handler := &testHandler{serve: func(_ *Conn, _ []byte, res *Responder) {
		res.SendThen(func(err error) { done <- err },
			Chunk{File: file, FileOffset: int64(len(content)) - 10, FileLength: 100})
	}}
	server := startServer(t, testConfig(t), handler)
	client := dial(t, server)
	client.send([]byte("x"))
	client.awaitClosed()
	if err := <-done; !errors.Is(err, ErrConnectionClosed) {
		t.Fatalf("done = %v, want ErrConnectionClosed", err)
	}
}
