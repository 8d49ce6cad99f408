package main

import (
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/listener/testpki"
	"github.com/sluice-mq/sluice/localcluster"
)

// TestTLSInterBrokerClusterReplicatesAndFailsOver runs three nodes whose inter-broker listener
// is SSL with client certificates required (mTLS; the Raft port, and so broker heartbeats, use
// the same certificates), clients on a PLAINTEXT listener. A topic with RF=3 replicates over TLS
// (the leader's file ranges are copied and encrypted, never sendfile'd, for its followers), the
// leader is killed, another takes over, and every acknowledged record is read back.
func TestTLSInterBrokerClusterReplicatesAndFailsOver(t *testing.T) {
	const topic = "mtls-replicated"
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "cluster")
	node := ca.Server(t, "node", testpki.Options{}) // one certificate for 127.0.0.1 serves every node
	logs := &lockedBuffer{}
	tlsArgs := []string{"--tls-cert", node.CertFile, "--tls-key", node.KeyFile, "--tls-ca", ca.CertFile, "--tls-client-auth", "required"}
	c, err := localcluster.New(localcluster.Config{
		Binary: sluicedBinary, Dir: t.TempDir(), Nodes: 3, Args: append(slices.Clone(clusterArgs), tlsArgs...), Logs: logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		n.Args = []string{"--listeners", "CLIENT://" + n.Kafka + ",INTERNAL://127.0.0.1:0",
			"--listener-security-protocol-map", "CLIENT:PLAINTEXT,INTERNAL:SSL", "--inter-broker-listener-name", "INTERNAL"}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last cluster log lines:\n%s", logs.tail(200))
		}
		c.Close()
	})
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 30*time.Second)
	info := leaderOf(t, admin, topic, 0)

	var values []string
	for i := range 30 {
		value := "before-" + string(rune('a'+i%26)) + strings.Repeat("x", i)
		produceAcked(t, admin, info.leader, topic, value)
		values = append(values, value)
	}
	// Followers fetch over the SSL listener: the leader could not sendfile to them.
	copied, _ := scrapeMetric(t, c.Node(info.leader), "sluice_net_copied_file_bytes_total")
	sent, _ := scrapeMetric(t, c.Node(info.leader), "sluice_net_sendfile_bytes_total")
	if copied == 0 || sent != 0 {
		t.Fatalf("leader %d: copied file bytes %v, sendfile bytes %v; want replication over TLS only", info.leader, copied, sent)
	}

	// The Raft port (Raft RPCs and forwarded calls such as heartbeats) speaks only TLS: a
	// plaintext forwarded call gets the connection closed, not an answer.
	raft, err := net.Dial("tcp", c.Node(info.leader).Raft)
	if err != nil {
		t.Fatal(err)
	}
	defer raft.Close()
	raft.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := raft.Write([]byte{'F', 0, 0, 0, 2, '{', '}'}); err != nil {
		t.Fatal(err)
	}
	if answer, err := io.ReadAll(raft); len(answer) > 0 || isTimeout(err) {
		t.Fatalf("plaintext call on the TLS Raft port: answered %q, %v", answer, err)
	}

	c.Node(info.leader).Kill()
	var next partitionInfo
	eventually(t, 30*time.Second, "a new leader after the kill", func() bool {
		parts, ok := describeTopic(admin, topic)
		next = parts[0]
		return ok && next.leader >= 0 && next.leader != info.leader
	})
	for i := range 10 {
		value := "after-" + string(rune('a'+i))
		produceAcked(t, admin, next.leader, topic, value)
		values = append(values, value)
	}
	var survivor *localcluster.Node
	for _, n := range c.Nodes {
		if n.ID != info.leader {
			survivor = n
			break
		}
	}
	records := consumeAll(t, survivor.Kafka, topic, len(values))
	for i, record := range records {
		if i >= len(values) || record.value != values[i] || record.offset != int64(i) {
			t.Fatalf("record %d: %+v, want %q at offset %d", i, record, values[min(i, len(values)-1)], i)
		}
	}
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}
