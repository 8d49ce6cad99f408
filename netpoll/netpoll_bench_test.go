package netpoll

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
)

// BenchmarkPipelinedRoundTrips measures small request/response round trips pipelined on one
// connection (up to 64 outstanding), answered inline on the event loop or from another
// goroutine.
func BenchmarkPipelinedRoundTrips(b *testing.B) {
	for _, size := range []int{16, 1024} {
		for _, mode := range []string{"inline", "goroutine"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, mode), func(b *testing.B) {
				benchmarkRoundTrips(b, size, mode == "goroutine")
			})
		}
	}
}

func benchmarkRoundTrips(b *testing.B, size int, answerElsewhere bool) {
	const window = 64
	cfg := testConfig(b)
	cfg.EventLoops = 1
	cfg.Metrics = nil
	answers := make(chan *pendingRequest, window)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		if answerElsewhere {
			answers <- &pendingRequest{frame: frame, res: res}
			return
		}
		res.Send(Chunk{Bytes: frame})
	}}
	if answerElsewhere {
		done := make(chan struct{})
		b.Cleanup(func() { close(done) })
		go func() {
			for {
				select {
				case request := <-answers:
					request.res.Send(Chunk{Bytes: request.frame})
				case <-done:
					return
				}
			}
		}()
	}
	server := startServer(b, cfg, handler)
	conn, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })

	request := binary.BigEndian.AppendUint32(nil, uint32(size))
	request = append(request, make([]byte, size)...)
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	writeErr := make(chan error, 1)
	b.SetBytes(int64(2 * (size + 4)))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		writer := bufio.NewWriterSize(conn, 64<<10)
		for range b.N {
			select {
			case <-credits:
			default:
				if err := writer.Flush(); err != nil {
					writeErr <- err
					return
				}
				<-credits
			}
			if _, err := writer.Write(request); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- writer.Flush()
	}()
	reader := bufio.NewReaderSize(conn, 64<<10)
	response := make([]byte, size+4)
	for range b.N {
		if _, err := io.ReadFull(reader, response); err != nil {
			b.Fatal(err)
		}
		credits <- struct{}{}
	}
	b.StopTimer()
	if err := <-writeErr; err != nil {
		b.Fatal(err)
	}
}
