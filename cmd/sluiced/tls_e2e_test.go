package main

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/listener/testpki"
)

var listenersLine = regexp.MustCompile(`msg="broker serving" .* listeners=(\S+)`)

// listenerAddresses reads the named listeners' addresses from the daemon's serving line.
func listenerAddresses(t *testing.T, d *daemon) map[string]string {
	t.Helper()
	m := listenersLine.FindStringSubmatch(d.logs())
	if m == nil {
		t.Fatalf("no listeners in the serving line\n%s", d.logs())
	}
	out := map[string]string{}
	for _, item := range strings.Split(m[1], ",") {
		name, address, _ := strings.Cut(item, "://")
		out[name] = address
	}
	return out
}

// TestTLSListenerServesKafkaClientsAndRefusesBadOnes runs one sluiced with a PLAINTEXT and an
// SSL listener (client certificates verified when given): franz-go and kcat produce and consume
// over TLS, Metadata on the SSL listener gives the SSL address, a client certificate's subject
// becomes the connection's principal, a plaintext client, an untrusted and an expired
// certificate are refused while a TLS client keeps working, and SIGHUP swaps the certificate
// for new connections.
func TestTLSListenerServesKafkaClientsAndRefusesBadOnes(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "sluice")
	server := ca.Server(t, "server", testpki.Options{})
	d := startDaemon(t, t.TempDir(), "--log-level", "debug",
		"--listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"--tls-cert", server.CertFile, "--tls-key", server.KeyFile, "--tls-ca", ca.CertFile,
		"--tls-client-auth", "requested", "--tls-reload-check-interval", "0")
	addresses := listenerAddresses(t, d)
	sslAddress := addresses["SSL"]
	if sslAddress == "" || addresses["PLAINTEXT"] == "" {
		t.Fatalf("listeners %v", addresses)
	}

	// franz-go over TLS with a client certificate.
	alice := ca.Client(t, "alice", testpki.Options{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"payments"}}})
	tlsConfig := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{alice.TLS}}
	client, err := kgo.NewClient(kgo.SeedBrokers(sslAddress), kgo.DialTLSConfig(tlsConfig),
		kgo.DefaultProduceTopic("secure"), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("secure"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 100 {
		client.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("franz-%d", i))}, nil)
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}
	metadata, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
	if err != nil || len(metadata.Brokers) != 1 {
		t.Fatalf("metadata: %v %+v", err, metadata)
	}
	if got := net.JoinHostPort(metadata.Brokers[0].Host, strconv.Itoa(int(metadata.Brokers[0].Port))); got != sslAddress {
		t.Fatalf("metadata on the SSL listener advertises %s, want %s", got, sslAddress)
	}
	// The PLAINTEXT listener's Metadata gives the PLAINTEXT address.
	plainClient := newClient(t, addresses["PLAINTEXT"])
	plainMetadata, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, plainClient)
	if err != nil || len(plainMetadata.Brokers) != 1 {
		t.Fatalf("metadata on the PLAINTEXT listener: %v", err)
	}
	if got := net.JoinHostPort(plainMetadata.Brokers[0].Host, strconv.Itoa(int(plainMetadata.Brokers[0].Port))); got != addresses["PLAINTEXT"] {
		t.Fatalf("metadata on the PLAINTEXT listener advertises %s, want %s", got, addresses["PLAINTEXT"])
	}
	if !strings.Contains(d.logs(), `principal="User:CN=alice,OU=payments"`) {
		t.Fatalf("the client certificate's principal did not reach the broker\n%s", d.logs())
	}

	// kcat (librdkafka) over TLS: produce, then read back everything.
	kcatTLS := []string{"-b", sslAddress, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.CertFile}
	produce := exec.Command("kcat", append(kcatTLS, "-P", "-t", "secure")...)
	produce.Stdin = strings.NewReader("kcat-1\nkcat-2\nkcat-3\n")
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce over TLS: %v\n%s", err, out)
	}
	out, err := exec.Command("kcat", append(kcatTLS, "-C", "-t", "secure", "-o", "beginning", "-e", "-q")...).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat consume over TLS: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 103 || lines[0] != "franz-0" || lines[102] != "kcat-3" {
		t.Fatalf("kcat read %d records (%q ... %q), want 103", len(lines), lines[0], lines[len(lines)-1])
	}
	consumed := 0
	for consumed < 103 {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("franz-go consume over TLS: %v", err)
		}
		consumed += fetches.NumRecords()
	}

	// Refused: a plaintext Kafka client, an untrusted and an expired certificate.
	plain, err := net.Dial("tcp", sslAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, apiVersions, 1)
	if _, err := plain.Write(frame); err != nil {
		t.Fatal(err)
	}
	plain.SetReadDeadline(time.Now().Add(20 * time.Second))
	if answer, err := io.ReadAll(plain); err != nil || looksLikeKafkaFrame(answer) {
		t.Fatalf("plaintext client on the TLS port: read %d bytes, %v; want the connection closed", len(answer), err)
	}
	stranger := testpki.NewCA(t, dir, "stranger").Client(t, "mallory", testpki.Options{})
	expired := ca.Client(t, "expired", testpki.Options{Expired: true})
	for name, certificate := range map[string]tls.Certificate{"untrusted": stranger.TLS, "expired": expired.TLS} {
		// GetClientCertificate sends it even though the server names another CA as acceptable.
		config := &tls.Config{RootCAs: ca.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &certificate, nil
		}}
		if err := tlsRoundTrip(sslAddress, config); err == nil {
			t.Fatalf("%s client certificate accepted", name)
		}
	}
	eventually(t, 20*time.Second, "three refused handshakes counted", func() bool {
		return d.metric(t, "sluice_net_tls_handshake_failures_total") == "3"
	})
	client.Produce(ctx, &kgo.Record{Value: []byte("after the refusals")}, nil)
	if err := client.Flush(ctx); err != nil {
		t.Fatalf("the TLS client stopped working after others were refused: %v", err)
	}

	// SIGHUP reloads the certificate: a new connection sees the new serial.
	before := serverSerial(t, sslAddress, ca)
	renewed := ca.Server(t, "server", testpki.Options{}) // same files, new serial
	if renewed.Certificate.SerialNumber.String() == before {
		t.Fatal("test certificate did not get a new serial")
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "new connections get the reloaded certificate", func() bool {
		return serverSerial(t, sslAddress, ca) == renewed.Certificate.SerialNumber.String()
	})
	client.Produce(ctx, &kgo.Record{Value: []byte("after the reload")}, nil)
	if err := client.Flush(ctx); err != nil {
		t.Fatalf("produce after the reload: %v", err)
	}
	d.stop()
}

// looksLikeKafkaFrame reports whether b starts with a plausible size-prefixed response.
func looksLikeKafkaFrame(b []byte) bool {
	return len(b) >= 8 && int(binary.BigEndian.Uint32(b)) == len(b)-4
}

// tlsRoundTrip handshakes and sends an ApiVersions request; it fails when the server refuses
// (during the handshake, or on the first read with TLS 1.3).
func tlsRoundTrip(address string, config *tls.Config) error {
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: config}
	conn, err := dialer.Dial("tcp", address)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	if _, err := conn.Write(frame); err != nil {
		return err
	}
	var header [4]byte
	if _, err := io.ReadFull(conn, header[:]); err != nil {
		return err
	}
	return nil
}

// serverSerial is the serial of the certificate the server presents to a new connection.
func serverSerial(t *testing.T, address string, ca *testpki.CA) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", address, &tls.Config{RootCAs: ca.Pool()})
	if err != nil {
		t.Fatalf("dial %s: %v", address, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
