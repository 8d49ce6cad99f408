package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnListAndDescribe leaves one transaction open and one committed, then lists and describes
// them.
func TestTxnListAndDescribe(t *testing.T) {
	brokers := startSluiced(t)
	ok(t, brokers, nil, "topic", "create", "payments", "--partitions", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	producer := func(id string) *kgo.Client {
		client, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.TransactionalID(id), kgo.DefaultProduceTopic("payments"),
			kgo.TransactionTimeout(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(client.Close)
		if err := client.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := client.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return client
	}
	if err := producer("done").EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	producer("open")

	if r := ok(t, brokers, nil, "txn", "list"); !strings.Contains(r.stdout, "open") || !strings.Contains(r.stdout, "Ongoing") ||
		!strings.Contains(r.stdout, "CompleteCommit") {
		t.Fatalf("txn list:\n%s", r.stdout)
	}
	var rows []txnRow
	if err := json.Unmarshal([]byte(ok(t, brokers, nil, "txn", "list", "--state", "Ongoing", "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].TransactionalID != "open" {
		t.Fatalf("txn list --state Ongoing: %+v", rows)
	}
	var described []txnDescription
	if err := json.Unmarshal([]byte(ok(t, brokers, nil, "txn", "describe", "open", "--json").stdout), &described); err != nil {
		t.Fatal(err)
	}
	if len(described) != 1 || described[0].State != "Ongoing" || described[0].StartTimestamp <= 0 || len(described[0].Partitions) != 1 ||
		described[0].Partitions[0].Topic != "payments" || described[0].TimeoutMillis != 60_000 {
		t.Fatalf("txn describe open: %+v", described)
	}
	if r := ok(t, brokers, nil, "txn", "describe", "open", "done"); !strings.Contains(r.stdout, "payments:") {
		t.Fatalf("txn describe:\n%s", r.stdout)
	}
	failsInOneLine(t, "describe of an unknown id", sluice(t, brokers, nil, "txn", "describe", "nobody"), exitNotFound, "nobody")
}
