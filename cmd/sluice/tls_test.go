package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/listener/testpki"
)

// TestCLIOverMutualTLS runs sluiced with one SSL listener that requires client certificates;
// the CLI creates a topic, produces and consumes with --tls-ca/--tls-cert/--tls-key (sluice's
// client and franz-go both), the same through SLUICE_TLS_* variables, and fails without them.
func TestCLIOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "cli")
	server := ca.Server(t, "server", testpki.Options{})
	operator := ca.Client(t, "operator", testpki.Options{})
	cmd := exec.Command(sluicedBinary, "--data-dir", t.TempDir(), "--listeners", "SSL://127.0.0.1:0", "--http", "127.0.0.1:0",
		"--raft-listen", "127.0.0.1:0", "--segment-bytes", "16777216",
		"--tls-cert", server.CertFile, "--tls-key", server.KeyFile, "--tls-ca", ca.CertFile, "--tls-client-auth", "required")
	brokers := waitForLine(t, cmd, servingLine)
	flags := []string{"--tls-ca", ca.CertFile, "--tls-cert", operator.CertFile, "--tls-key", operator.KeyFile}

	ok(t, brokers, nil, append([]string{"topic", "create", "secured", "--partitions", "2"}, flags...)...)
	ok(t, brokers, strings.NewReader("one\ntwo\nthree\n"), append([]string{"produce", "secured"}, flags...)...)
	got := ok(t, brokers, nil, append([]string{"consume", "secured", "--from-beginning", "--count", "3"}, flags...)...)
	if lines := strings.Fields(got.stdout); len(lines) != 3 {
		t.Fatalf("consumed %q", got.stdout)
	}

	viaEnvironment := exec.Command(sluiceBinary, "topic", "describe", "secured")
	viaEnvironment.Env = append(viaEnvironment.Environ(), "SLUICE_BROKERS="+brokers, "SLUICE_TLS_CA="+ca.CertFile,
		"SLUICE_TLS_CERT="+operator.CertFile, "SLUICE_TLS_KEY="+operator.KeyFile)
	if out, err := viaEnvironment.CombinedOutput(); err != nil || !strings.Contains(string(out), "secured") {
		t.Fatalf("topic describe with SLUICE_TLS_*: %v\n%s", err, out)
	}

	// Without a client certificate the broker refuses the handshake; without TLS it closes.
	if r := sluice(t, brokers, nil, "topic", "list", "--tls-ca", ca.CertFile, "--timeout", "3s"); r.code == 0 {
		t.Fatalf("topic list without a client certificate succeeded: %s", r.stdout)
	}
	if r := sluice(t, brokers, nil, "topic", "list", "--timeout", "3s"); r.code == 0 {
		t.Fatalf("plaintext topic list on a TLS listener succeeded: %s", r.stdout)
	}
}
