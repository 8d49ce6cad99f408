package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/listener/testpki"
	"github.com/sluice-mq/sluice/scram"
)

// TestSASLOverTLS is issue 14's headline: one SASL_SSL listener (a SASL listener needs no
// --require-sasl and turns the authorizer on). kcat with SCRAM-SHA-512 over TLS, franz-go with TLS
// and SCRAM, and this repo's client with TLS and PLAIN produce and consume; a wrong password over
// TLS is refused while the others keep working.
func TestSASLOverTLS(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "sluice")
	server := ca.Server(t, "server", testpki.Options{})
	usersFile := filepath.Join(dir, "users")
	if err := os.WriteFile(usersFile, []byte("admin:admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, filepath.Join(dir, "data"), "--listeners", "SASL_SSL://127.0.0.1:0",
		"--tls-cert", server.CertFile, "--tls-key", server.KeyFile,
		"--sasl-plain-users", usersFile, "--super-users", "User:admin")
	address := listenerAddresses(t, d)["SASL_SSL"]
	if address == "" {
		t.Fatalf("no SASL_SSL listener in\n%s", d.logs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tlsConfig := &tls.Config{RootCAs: ca.Pool()}

	admin, err := client.New(client.WithSeedBrokers(address), client.WithTLS(tlsConfig.Clone()),
		client.WithSASL(client.SASLPlain, "admin", "admin-secret"), client.WithRequestTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adminAPI := client.NewAdmin(admin)
	if err := adminAPI.UpsertScramUser(ctx, scram.SHA512, "carol", "carol-secret", 4096); err != nil {
		t.Fatalf("create a SCRAM user over SASL_SSL: %v", err)
	}
	grant(t, admin,
		allowBinding("User:carol", acl.OperationAll, acl.ResourceTopic, "tls.", acl.PatternPrefixed),
		allowBinding("User:carol", acl.OperationRead, acl.ResourceGroup, "tls.", acl.PatternPrefixed))
	if err := adminAPI.CreateTopics(ctx, client.TopicSpec{Name: "tls.kcat", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}

	kcat := func(password string, stdin []byte, args ...string) ([]byte, error) {
		full := append([]string{"-b", address, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + ca.CertFile,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=carol", "-X", "sasl.password=" + password}, args...)
		kctx, kcancel := context.WithTimeout(ctx, 20*time.Second)
		defer kcancel()
		cmd := exec.CommandContext(kctx, "kcat", full...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Logf("kcat stderr: %s", stderr.String())
		}
		return out, err
	}
	lines := []byte("alpha\nbeta\ngamma\n")
	if out, err := kcat("carol-secret", lines, "-P", "-t", "tls.kcat"); err != nil {
		t.Fatalf("kcat SASL_SSL SCRAM-SHA-512 produce: %v %s", err, out)
	}
	if out, err := kcat("carol-secret", nil, "-C", "-t", "tls.kcat", "-o", "beginning", "-e", "-q"); err != nil || !bytes.Equal(out, lines) {
		t.Fatalf("kcat SASL_SSL consume: %q, %v", out, err)
	}
	if out, err := kcat("wrong", nil, "-L", "-t", "tls.kcat"); err == nil {
		t.Fatalf("kcat with a wrong password over SASL_SSL listed metadata: %s", out)
	}

	franz := newClient(t, address, kgo.DialTLSConfig(tlsConfig.Clone()), scram512Opt("carol", "carol-secret"),
		kgo.ConsumeTopics("tls.kcat"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := franz.ProduceSync(ctx, &kgo.Record{Topic: "tls.kcat", Value: []byte("franz")}).FirstErr(); err != nil {
		t.Fatalf("franz-go SASL_SSL produce: %v", err)
	}
	got := 0
	for got < 4 {
		fetches := franz.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("franz-go SASL_SSL consume after %d records: %v", got, err)
		}
		got += fetches.NumRecords()
	}
}
