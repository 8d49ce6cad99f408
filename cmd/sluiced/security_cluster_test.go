package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSASLClusterReplicates: three nodes requiring SASL, brokers authenticating to each other as
// a PLAIN super user (--inter-broker-sasl-*): an RF=3 topic takes acks=all writes (which need the
// followers' authenticated fetches) and reads them back, and a follower without credentials would
// be refused (the matrix test covers that refusal).
func TestSASLClusterReplicates(t *testing.T) {
	usersFile := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(usersFile, []byte("admin:admin-secret\nbroker:broker-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, "--require-sasl", "--sasl-plain-users", usersFile, "--super-users", "User:admin;User:broker",
		"--inter-broker-sasl-mechanism", "PLAIN", "--inter-broker-sasl-user", "broker", "--inter-broker-sasl-password", "broker-secret")
	admin := clusterClient(t, c, plainOpt("admin", "admin-secret"), kgo.RequiredAcks(kgo.AllISRAcks()))
	createReplicatedTopic(t, admin, "replicated", 1, 3, map[string]string{"min.insync.replicas": "3"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 20 {
		if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d with min.insync.replicas=3: %v", i, err)
		}
	}
	consumer := clusterClient(t, c, plainOpt("admin", "admin-secret"), kgo.ConsumeTopics("replicated"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	read := 0
	for read < 20 {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		read += fetches.NumRecords()
	}
	eventually(t, 20*time.Second, "every replica in sync", func() bool {
		info, ok := describeTopic(admin, "replicated")
		return ok && len(info[0].isr) == 3
	})
}
