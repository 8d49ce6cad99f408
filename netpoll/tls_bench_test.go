package netpoll

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/sluice-mq/sluice/listener/testpki"
)

// BenchmarkFileResponses measures fetch-like responses (a header and a file range) on one
// connection, plaintext (sendfile) against TLS (read, encrypt, write; the client decrypts in
// the same process), and small pipelined round trips over TLS.
func BenchmarkFileResponses(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		for _, secure := range []bool{false, true} {
			name := "plaintext"
			if secure {
				name = "tls"
			}
			b.Run(fmt.Sprintf("%s/size=%d", name, size), func(b *testing.B) { benchmarkFileResponses(b, size, secure) })
		}
	}
}

func benchmarkFileResponses(b *testing.B, size int, secure bool) {
	file, _ := tempFile(b, size, 3)
	handler := &testHandler{serve: func(_ *Conn, frame []byte, res *Responder) {
		res.Send(Chunk{Bytes: frame}, Chunk{File: file, FileLength: int64(size)})
	}}
	cfg := testConfig(b)
	cfg.EventLoops = 1
	cfg.Metrics = nil
	var clientConfig *tls.Config
	if secure {
		ca := testpki.NewCA(b, b.TempDir(), "bench")
		pair := ca.Server(b, "server", testpki.Options{})
		cfg.Listeners = []ListenerConfig{{Name: "SSL", SecurityProtocol: "SSL", Address: "127.0.0.1:0",
			TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair.TLS}}}}
		clientConfig = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	}
	server := startServer(b, cfg, handler)
	var conn net.Conn
	conn, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	if secure {
		conn = tls.Client(conn, clientConfig)
	}
	reader := bufio.NewReaderSize(conn, 256<<10)
	request := frame([]byte("f"))
	response := make([]byte, 4+1+size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := conn.Write(request); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(reader, response); err != nil {
			b.Fatal(err)
		}
	}
}
