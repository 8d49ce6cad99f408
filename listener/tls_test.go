package listener

import (
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/listener/testpki"
)

// serveTLS accepts TLS connections with config until the test ends, completing handshakes.
func serveTLS(t *testing.T, config *tls.Config) string {
	t.Helper()
	socket, err := tls.Listen("tcp", "127.0.0.1:0", config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { socket.Close() })
	go func() {
		for {
			conn, err := socket.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.(*tls.Conn).Handshake()
				_, _ = conn.Read(make([]byte, 1))
			}()
		}
	}()
	return socket.Addr().String()
}

// presentedSerial dials address and returns the serial of the server's certificate.
func presentedSerial(t *testing.T, address string, client *tls.Config) (string, error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", address, client)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func TestReloaderServesNewCertificatesAndKeepsOldOnBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "reload")
	first := ca.Server(t, "server", testpki.Options{})
	set := metrics.NewSet()
	reloader, err := NewReloader(Files{CertFile: first.CertFile, KeyFile: first.KeyFile, CAFile: ca.CertFile, ClientAuth: ClientAuthRequired},
		0, nil, set)
	if err != nil {
		t.Fatal(err)
	}
	defer reloader.Close()
	server, err := reloader.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	address := serveTLS(t, server)
	// The client side of the same reloader: it offers the node's certificate (mTLS) and checks
	// the server's against the CA and the dialed address.
	client := reloader.ClientConfig()
	client.ServerName = "127.0.0.1"
	if serial, err := presentedSerial(t, address, client); err != nil || serial != first.Certificate.SerialNumber.String() {
		t.Fatalf("first serial %s, %v", serial, err)
	}

	second := ca.Server(t, "server", testpki.Options{})
	if err := reloader.Reload(); err != nil {
		t.Fatal(err)
	}
	if serial, err := presentedSerial(t, address, client); err != nil || serial != second.Certificate.SerialNumber.String() {
		t.Fatalf("after reload: serial %s, %v; want %s", serial, err, second.Certificate.SerialNumber)
	}

	// A broken key file: the reload fails, is counted, and the previous certificate stays.
	if err := os.WriteFile(second.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := reloader.Reload(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	}
	if got := set.GetOrCreateCounter("sluice_tls_reload_errors_total").Get(); got != 1 {
		t.Fatalf("reload errors counted %d", got)
	}
	if serial, err := presentedSerial(t, address, client); err != nil || serial != second.Certificate.SerialNumber.String() {
		t.Fatalf("after a failed reload: serial %s, %v", serial, err)
	}

	// A server the CA did not sign is refused by the client config.
	stranger := testpki.NewCA(t, dir, "stranger").Server(t, "stranger", testpki.Options{})
	other := serveTLS(t, &tls.Config{Certificates: []tls.Certificate{stranger.TLS}})
	if _, err := presentedSerial(t, other, client); err == nil {
		t.Fatal("client config accepted a server certificate from another CA")
	}
}

func TestReloaderPollsFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "poll")
	first := ca.Server(t, "server", testpki.Options{})
	reloader, err := NewReloader(Files{CertFile: first.CertFile, KeyFile: first.KeyFile}, 20*time.Millisecond, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reloader.Close()
	server, _ := reloader.ServerConfig()
	address := serveTLS(t, server)
	client := &tls.Config{RootCAs: ca.Pool()}
	second := ca.Server(t, "server", testpki.Options{})
	deadline := time.Now().Add(20 * time.Second)
	for {
		serial, err := presentedSerial(t, address, client)
		if err == nil && serial == second.Certificate.SerialNumber.String() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("changed files not picked up: serial %s, %v", serial, err)
		}
		time.Sleep(20 * time.Millisecond) // the reloader polls the files and has no change signal; neither does the server
	}
}
