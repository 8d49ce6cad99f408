package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	franzscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/scram"
)

// startSecureDaemon starts sluiced requiring SASL, with PLAIN users from a file (admin is a super
// user) plus extraArgs.
func startSecureDaemon(t *testing.T, plainUsers map[string]string, extraArgs ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	var users strings.Builder
	for user, password := range plainUsers {
		users.WriteString(user + ":" + password + "\n")
	}
	usersFile := filepath.Join(dir, "users")
	if err := os.WriteFile(usersFile, []byte(users.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--require-sasl", "--sasl-plain-users", usersFile, "--super-users", "User:admin"}, extraArgs...)
	return startDaemon(t, filepath.Join(dir, "data"), args...)
}

// repoClient is this repository's client authenticated with SASL.
func repoClient(t *testing.T, address, mechanism, user, password string) *client.Client {
	t.Helper()
	c, err := client.New(client.WithSeedBrokers(address), client.WithSASL(mechanism, user, password),
		client.WithRequestTimeout(10*time.Second), client.WithDialTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func plainOpt(user, password string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism())
}

func scram512Opt(user, password string) kgo.Opt {
	return kgo.SASL(franzscram.Auth{User: user, Pass: password}.AsSha512Mechanism())
}

// grant creates ACLs as admin.
func grant(t *testing.T, admin *client.Client, bindings ...acl.Binding) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.NewAdmin(admin).CreateACLs(ctx, bindings...); err != nil {
		t.Fatal(err)
	}
}

func allowBinding(principal string, op acl.Operation, rt acl.ResourceType, name string, pattern acl.PatternType) acl.Binding {
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pattern, Principal: principal, Host: "*",
		Operation: op, Permission: acl.PermissionAllow}
}

// kcatSASL runs kcat with SASL settings and the given arguments.
func kcatSASL(t *testing.T, address, mechanism, user, password string, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	full := append([]string{"-b", address, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mechanism,
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + password}, args...)
	cmd := exec.CommandContext(ctx, "kcat", full...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(err.Error() + ": " + stderr.String())
	}
	return out, nil
}

// TestSASLClients: kcat, franz-go and this repo's client authenticate with SCRAM-SHA-512,
// SCRAM-SHA-256 and PLAIN against a SASL-only listener, produce and consume; a wrong password is
// refused with SASL_AUTHENTICATION_FAILED (counted) while the others keep working; a request before
// authentication closes the connection.
func TestSASLClients(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	d := startSecureDaemon(t, map[string]string{"admin": "admin-secret", "alice": "alice-secret"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := repoClient(t, d.kafka, client.SASLPlain, "admin", "admin-secret")
	adminAPI := client.NewAdmin(admin)
	if err := adminAPI.UpsertScramUser(ctx, scram.SHA512, "bob", "bob-secret", 4096); err != nil {
		t.Fatal(err)
	}
	if err := adminAPI.UpsertScramUser(ctx, scram.SHA256, "bob", "bob-secret", 8192); err != nil {
		t.Fatal(err)
	}
	users, err := adminAPI.DescribeScramUsers(ctx)
	if err != nil || len(users) != 1 || users[0].Mechanisms[scram.SHA256] != 8192 || users[0].Mechanisms[scram.SHA512] != 4096 {
		t.Fatalf("described users %+v, %v", users, err)
	}
	for _, principal := range []string{"User:bob", "User:alice"} {
		grant(t, admin,
			allowBinding(principal, acl.OperationWrite, acl.ResourceTopic, "sec.", acl.PatternPrefixed),
			allowBinding(principal, acl.OperationRead, acl.ResourceTopic, "sec.", acl.PatternPrefixed),
			allowBinding(principal, acl.OperationCreate, acl.ResourceTopic, "sec.", acl.PatternPrefixed),
			allowBinding(principal, acl.OperationRead, acl.ResourceGroup, "sec.", acl.PatternPrefixed))
	}
	if err := adminAPI.CreateTopics(ctx, client.TopicSpec{Name: "sec.kcat", Partitions: 1, ReplicationFactor: 1},
		client.TopicSpec{Name: "sec.franz", Partitions: 1, ReplicationFactor: 1}, client.TopicSpec{Name: "sec.repo", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}

	// kcat (librdkafka): SCRAM-SHA-512 produces, SCRAM-SHA-256 and PLAIN consume.
	lines := []byte("one\ntwo\nthree\n")
	if out, err := kcatSASL(t, d.kafka, "SCRAM-SHA-512", "bob", "bob-secret", lines, "-P", "-t", "sec.kcat"); err != nil {
		t.Fatalf("kcat SCRAM-SHA-512 produce: %v %s", err, out)
	}
	for _, login := range [][3]string{{"SCRAM-SHA-256", "bob", "bob-secret"}, {"PLAIN", "alice", "alice-secret"}} {
		out, err := kcatSASL(t, d.kafka, login[0], login[1], login[2], nil, "-C", "-t", "sec.kcat", "-o", "beginning", "-e", "-q")
		if err != nil || !bytes.Equal(out, lines) {
			t.Fatalf("kcat %s consume: %q, %v", login[0], out, err)
		}
	}
	// PLAIN also accepts SCRAM users, checked against their salted credentials.
	if out, err := kcatSASL(t, d.kafka, "PLAIN", "bob", "bob-secret", []byte("four\n"), "-P", "-t", "sec.kcat"); err != nil {
		t.Fatalf("kcat PLAIN as a SCRAM user: %v %s", err, out)
	}

	// franz-go: SCRAM-SHA-512 produces, PLAIN consumes in a group.
	producer := newClient(t, d.kafka, scram512Opt("bob", "bob-secret"))
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "sec.franz", Value: []byte("franz")}).FirstErr(); err != nil {
		t.Fatalf("franz-go SCRAM produce: %v", err)
	}
	consumer := newClient(t, d.kafka, plainOpt("alice", "alice-secret"), kgo.ConsumeTopics("sec.franz"), kgo.ConsumerGroup("sec.group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fetches := consumer.PollRecords(ctx, 1)
	if err := fetches.Err(); err != nil || fetches.NumRecords() != 1 || string(fetches.Records()[0].Value) != "franz" {
		t.Fatalf("franz-go PLAIN group consume: %v, %d records", err, fetches.NumRecords())
	}

	// This repo's client: SCRAM-SHA-256.
	bob := repoClient(t, d.kafka, client.SASLScramSHA256, "bob", "bob-secret")
	p, err := client.NewProducer(ctx, bob, client.WithAcks(client.AcksAll))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "sec.repo", Value: []byte("repo")}); err != nil {
		t.Fatalf("repo client produce: %v", err)
	}
	p.Close(ctx)
	c, err := client.NewConsumer(bob)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Assign(ctx, client.Assignment{Topic: "sec.repo", Partition: 0, Offset: client.AtStart()}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 1 {
		polled, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("repo client poll: %v", err)
		}
		for _, f := range polled {
			for _, r := range f.Records {
				got = append(got, string(r.Value))
			}
		}
	}
	if got[0] != "repo" {
		t.Fatalf("repo client read %q", got)
	}

	// Wrong password and unknown user: the same refusal, counted; the others keep working.
	failuresBefore, _ := strconv.Atoi(d.metric(t, "sluice_sasl_authentication_failures_total"))
	for _, login := range [][2]string{{"bob", "wrong"}, {"nobody", "bob-secret"}} {
		_, err := client.New(client.WithSeedBrokers(d.kafka), client.WithSASL(client.SASLScramSHA512, login[0], login[1]))
		if err == nil {
			c := repoClient(t, d.kafka, client.SASLScramSHA512, login[0], login[1])
			_, err = client.NewAdmin(c).ListTopics(ctx, false)
		}
		var kafkaErr *client.KafkaError
		if !errors.As(err, &kafkaErr) || kafkaErr.Code != kerr.SaslAuthenticationFailed.Code || !strings.Contains(kafkaErr.Message, "invalid username or password") {
			t.Fatalf("login %v: %v, want SASL_AUTHENTICATION_FAILED with the generic message", login, err)
		}
	}
	wrongFranz := newClient(t, d.kafka, scram512Opt("bob", "wrong"))
	if err := wrongFranz.Ping(ctx); err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("franz-go with a wrong password: %v", err)
	}
	if out, err := kcatSASL(t, d.kafka, "SCRAM-SHA-512", "bob", "wrong", nil, "-L"); err == nil {
		t.Fatalf("kcat with a wrong password listed metadata: %s", out)
	}
	eventually(t, 10*time.Second, "failures counted", func() bool {
		failures, _ := strconv.Atoi(d.metric(t, "sluice_sasl_authentication_failures_total"))
		return failures >= failuresBefore+4
	})
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "sec.franz", Value: []byte("still")}).FirstErr(); err != nil {
		t.Fatalf("an authenticated client stopped working after others failed: %v", err)
	}
	if !strings.Contains(d.logs(), "SASL authentication failed") {
		t.Fatal("no log line for the failed authentications")
	}

	// A request before authentication closes the connection unanswered.
	conn, err := net.Dial("tcp", d.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	metadata := kmsg.NewPtrMetadataRequest()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, metadata, 1)
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("metadata before SASL: read %v (size %d), want the connection closed", err, binary.BigEndian.Uint32(size[:]))
	}
}

// TestSASLReauthentication: with --connections-max-reauth the broker answers a session lifetime;
// franz-go re-authenticates within it and keeps producing past several lifetimes, and a raw
// connection that does not re-authenticate is closed when it next sends a request.
func TestSASLReauthentication(t *testing.T) {
	d := startSecureDaemon(t, map[string]string{"admin": "admin-secret"}, "--connections-max-reauth", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	producer := newClient(t, d.kafka, plainOpt("admin", "admin-secret"), kgo.AllowAutoTopicCreation())
	deadline := time.Now().Add(3500 * time.Millisecond)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", i, err)
		}
	}
	successes, _ := strconv.Atoi(d.metric(t, "sluice_sasl_authentications_total"))
	if successes < 3 {
		t.Fatalf("%d authentications over 3.5 session lifetimes of 1 s", successes)
	}

	// A raw connection: handshake and authenticate, see the lifetime, let it pass, send Metadata.
	conn, err := net.Dial("tcp", d.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	roundTrip := func(req kmsg.Request, id int32) ([]byte, error) {
		if _, err := conn.Write(formatter.AppendRequest(nil, req, id)); err != nil {
			return nil, err
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		_, err := io.ReadFull(conn, body)
		return body, err
	}
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Version, handshake.Mechanism = 1, "PLAIN"
	if _, err := roundTrip(handshake, 1); err != nil {
		t.Fatal(err)
	}
	authenticate := kmsg.NewPtrSASLAuthenticateRequest()
	authenticate.Version, authenticate.SASLAuthBytes = 1, []byte("\x00admin\x00admin-secret")
	body, err := roundTrip(authenticate, 2)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body[4:]); err != nil || resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1000 {
		t.Fatalf("authenticate: %+v, %v", resp, err)
	}
	time.Sleep(1100 * time.Millisecond) // the condition is the passing of the session lifetime itself
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 4
	if _, err := roundTrip(metadata, 3); !errors.Is(err, io.EOF) {
		t.Fatalf("request after the session expired: %v, want the connection closed", err)
	}
}

// TestSASLHandshakeV0: after SaslHandshake v0 the token travels as a bare frame and the answer
// comes back bare (here PLAIN's empty one); the connection then serves requests. An unknown
// mechanism gets UNSUPPORTED_SASL_MECHANISM with the enabled list.
func TestSASLHandshakeV0(t *testing.T) {
	d := startSecureDaemon(t, map[string]string{"admin": "admin-secret"})
	conn, err := net.Dial("tcp", d.kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	readFrame := func() []byte {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatal(err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, frame); err != nil {
			t.Fatal(err)
		}
		return frame
	}
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Mechanism = "GSSAPI"
	conn.Write(formatter.AppendRequest(nil, handshake, 1))
	refused := kmsg.NewPtrSASLHandshakeResponse()
	if err := refused.ReadFrom(readFrame()[4:]); err != nil || refused.ErrorCode != kerr.UnsupportedSaslMechanism.Code ||
		!slices.Equal(refused.SupportedMechanisms, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}) {
		t.Fatalf("GSSAPI handshake: %+v %v", refused, err)
	}
	handshake.Mechanism = "PLAIN"
	conn.Write(formatter.AppendRequest(nil, handshake, 2))
	accepted := kmsg.NewPtrSASLHandshakeResponse()
	if err := accepted.ReadFrom(readFrame()[4:]); err != nil || accepted.ErrorCode != 0 {
		t.Fatalf("PLAIN handshake v0: %+v %v", accepted, err)
	}
	token := []byte("\x00admin\x00admin-secret")
	conn.Write(binary.BigEndian.AppendUint32(nil, uint32(len(token))))
	conn.Write(token)
	if answer := readFrame(); len(answer) != 0 {
		t.Fatalf("bare PLAIN answer %q, want empty", answer)
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 4
	conn.Write(formatter.AppendRequest(nil, metadata, 3))
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 4
	if err := resp.ReadFrom(readFrame()[4:]); err != nil || len(resp.Brokers) != 1 {
		t.Fatalf("metadata after v0 authentication: %+v %v", resp, err)
	}
}

// TestAuthorizerWithoutSASL: --authorizer on a plaintext listener checks requests as
// User:ANONYMOUS; with --allow-everyone-if-no-acl-found a topic no ACL names is open, and one an ACL
// names is closed to everyone the ACL does not allow.
func TestAuthorizerWithoutSASL(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--authorizer", "--allow-everyone-if-no-acl-found")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	anonymous := newClient(t, d.kafka, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	createTopic(t, anonymous, "open", 1)
	createTopic(t, anonymous, "closed", 1)
	if err := anonymous.ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce where no ACL applies: %v", err)
	}
	c, err := client.New(client.WithSeedBrokers(d.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := client.NewAdmin(c).CreateACLs(ctx, allowBinding("User:someone", acl.OperationWrite, acl.ResourceTopic, "closed", acl.PatternLiteral)); err != nil {
		t.Fatal(err)
	}
	err = anonymous.ProduceSync(ctx, &kgo.Record{Topic: "closed", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce as User:ANONYMOUS where an ACL names another principal: %v", err)
	}
	if err := anonymous.ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("produce to the open topic afterwards: %v", err)
	}
}
