package netpoll

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/listener/testpki"
)

// tlsTestServer serves an echo handler (and, for frames starting with "file", a file range)
// on a PLAINTEXT listener and an SSL one asking for client certificates. It records each
// connection's listener and principal.
type tlsTestServer struct {
	server *Server
	ca     *testpki.CA
	file   []byte

	mu         sync.Mutex
	principals []string
	listeners  []string
}

func startTLSServer(t *testing.T, clientAuth tls.ClientAuthType) *tlsTestServer {
	t.Helper()
	ca := testpki.NewCA(t, t.TempDir(), "netpoll")
	serverPair := ca.Server(t, "server", testpki.Options{})
	ts := &tlsTestServer{ca: ca}
	file, content := tempFile(t, 3<<20, 7)
	ts.file = content
	handler := &testHandler{
		opened: func(conn *Conn) {
			name, protocol := conn.Listener()
			ts.mu.Lock()
			ts.listeners = append(ts.listeners, name+"/"+protocol)
			ts.principals = append(ts.principals, conn.TLSPeerPrincipal())
			ts.mu.Unlock()
		},
		serve: func(_ *Conn, frame []byte, res *Responder) {
			if bytes.HasPrefix(frame, []byte("file")) {
				res.Send(Chunk{Bytes: frame}, Chunk{File: file, FileOffset: 0, FileLength: int64(len(content))})
				return
			}
			res.Send(Chunk{Bytes: frame})
		},
	}
	cfg := testConfig(t)
	cfg.Listeners = []ListenerConfig{
		{Name: "INTERNAL", SecurityProtocol: "PLAINTEXT", Address: "127.0.0.1:0"},
		{Name: "CLIENT", SecurityProtocol: "SSL", Address: "127.0.0.1:0", TLS: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{serverPair.TLS},
			ClientAuth:   clientAuth,
			ClientCAs:    ca.Pool(),
		}},
	}
	ts.server = startServer(t, cfg, handler)
	return ts
}

func (ts *tlsTestServer) dialTLS(t *testing.T, certificates ...tls.Certificate) (*testClient, error) {
	t.Helper()
	raw, err := net.Dial("tcp", ts.server.ListenerAddr("CLIENT").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	config := &tls.Config{RootCAs: ts.ca.Pool(), ServerName: "127.0.0.1"}
	if len(certificates) > 0 {
		// Sent whichever CAs the server names as acceptable (an untrusted one included).
		config.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certificates[0], nil }
	}
	conn := tls.Client(raw, config)
	if err := conn.Handshake(); err != nil {
		return nil, err
	}
	return &testClient{t: t, conn: raw.(*net.TCPConn), stream: conn, reader: bufio.NewReaderSize(conn, 64<<10)}, nil
}

func TestTLSListenerServesFramesAndFileChunksInOrder(t *testing.T) {
	ts := startTLSServer(t, tls.VerifyClientCertIfGiven)
	client, err := ts.dialTLS(t)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	// Many pipelined frames of mixed sizes, some larger than a TLS record, and file ranges.
	var want [][]byte
	var wire []byte
	for i := range 40 {
		payload := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*1500)
		if i%10 == 3 {
			payload = []byte(fmt.Sprintf("file%d", i))
			want = append(want, append(append([]byte{}, payload...), ts.file...))
		} else {
			want = append(want, payload)
		}
		wire = append(wire, frame(payload)...)
	}
	client.write(wire)
	for i, expected := range want {
		if got := client.mustReadFrame(); !bytes.Equal(got, expected) {
			t.Fatalf("response %d: %d bytes, want %d", i, len(got), len(expected))
		}
	}
	if ts.server.SendfileBytes() != 0 {
		t.Fatalf("sendfile used on a TLS connection (%d bytes)", ts.server.SendfileBytes())
	}
	if ts.server.CopiedFileBytes() != uint64(4*len(ts.file)) {
		t.Fatalf("copied file bytes %d, want %d", ts.server.CopiedFileBytes(), 4*len(ts.file))
	}
	// The plaintext listener still serves plaintext, with sendfile.
	plain := dialAddress(t, ts.server.ListenerAddr("INTERNAL").String())
	plain.send([]byte("file-plain"))
	if got := plain.mustReadFrame(); len(got) != len("file-plain")+len(ts.file) {
		t.Fatalf("plaintext file response %d bytes", len(got))
	}
	if ts.server.SendfileBytes() == 0 {
		t.Fatal("plaintext listener did not use sendfile")
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.listeners[0] != "CLIENT/SSL" || ts.listeners[1] != "INTERNAL/PLAINTEXT" || ts.principals[0] != "" {
		t.Fatalf("listeners %v principals %q", ts.listeners, ts.principals)
	}
}

func TestTLSClientCertificateBecomesThePrincipal(t *testing.T) {
	ts := startTLSServer(t, tls.RequireAndVerifyClientCert)
	alice := ts.ca.Client(t, "alice", testpki.Options{Subject: pkix.Name{
		CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"example"},
	}})
	client, err := ts.dialTLS(t, alice.TLS)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	client.send([]byte("hello"))
	if got := string(client.mustReadFrame()); got != "hello" {
		t.Fatalf("echo %q", got)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if want := "User:CN=alice,OU=eng,O=example"; ts.principals[0] != want {
		t.Fatalf("principal %q, want %q", ts.principals[0], want)
	}
}

func TestTLSListenerRefusesBadClientsAndKeepsServing(t *testing.T) {
	ts := startTLSServer(t, tls.RequireAndVerifyClientCert)
	good := ts.ca.Client(t, "good", testpki.Options{})
	client, err := ts.dialTLS(t, good.TLS)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	// A plaintext Kafka client on the TLS port.
	plain := dialAddress(t, ts.server.ListenerAddr("CLIENT").String())
	plain.send([]byte("not tls"))
	plain.awaitClosed()
	// A certificate from another CA, and an expired one from the right CA.
	stranger := testpki.NewCA(t, t.TempDir(), "stranger").Client(t, "mallory", testpki.Options{})
	expired := ts.ca.Client(t, "old", testpki.Options{Expired: true})
	for name, certificate := range map[string]tls.Certificate{"untrusted": stranger.TLS, "expired": expired.TLS} {
		refused, err := ts.dialTLS(t, certificate)
		if err == nil {
			// TLS 1.3 clients learn of the refusal on their first read.
			refused.send([]byte("x"))
			refused.awaitClosed()
		}
		t.Logf("%s certificate: handshake error %v", name, err)
	}
	// No certificate at all.
	if refused, err := ts.dialTLS(t); err == nil {
		refused.send([]byte("x"))
		refused.awaitClosed()
	}
	await(t, "four handshake failures counted", func() bool { return ts.server.metrics.tlsHandshakeFailures.Get() == 4 })
	client.send([]byte("still here"))
	if got := string(client.mustReadFrame()); got != "still here" {
		t.Fatalf("echo %q", got)
	}
}

func dialAddress(t *testing.T, address string) *testClient {
	t.Helper()
	conn, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &testClient{t: t, conn: conn.(*net.TCPConn), stream: conn, reader: bufio.NewReaderSize(conn, 64<<10)}
}

// TestTLSHandshakesAreBoundedInTimeAndNumber: a client that never finishes its handshake holds
// the only handshake slot until HandshakeTimeout closes it; meanwhile a second client waits in
// the backlog, and is served once the slot frees.
func TestTLSHandshakesAreBoundedInTimeAndNumber(t *testing.T) {
	ca := testpki.NewCA(t, t.TempDir(), "slow")
	pair := ca.Server(t, "server", testpki.Options{})
	cfg := testConfig(t)
	cfg.HandshakeTimeout = 300 * time.Millisecond
	cfg.MaxConcurrentHandshakes = 1
	cfg.Listeners = []ListenerConfig{{Name: "SSL", SecurityProtocol: "SSL", Address: "127.0.0.1:0",
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair.TLS}}}}
	server := startServer(t, cfg, echoHandler())
	silent := dialAddress(t, server.Addr().String()) // connects, sends nothing
	started := time.Now()
	raw, err := net.Dial("tcp", server.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	conn := tls.Client(raw, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if err := conn.Handshake(); err != nil {
		t.Fatalf("second client's handshake: %v", err)
	}
	if waited := time.Since(started); waited < cfg.HandshakeTimeout/2 {
		t.Fatalf("second handshake done after %v: the only slot should have been held by the silent client", waited)
	}
	silent.awaitClosed()
	if got := server.metrics.tlsHandshakeFailures.Get(); got != 1 {
		t.Fatalf("handshake failures %d, want 1 (the timeout)", got)
	}
	client := &testClient{t: t, conn: raw.(*net.TCPConn), stream: conn, reader: bufio.NewReader(conn)}
	client.send([]byte("served"))
	if got := string(client.mustReadFrame()); got != "served" {
		t.Fatalf("echo %q", got)
	}
}
