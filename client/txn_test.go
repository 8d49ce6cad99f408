package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// TestTransactionalProducer commits, aborts and commits again; read_committed consumers of this
// client see only the committed records, read_uncommitted ones see all. A second producer with the
// same transactional id fences the first.
func TestTransactionalProducer(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "txn", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := newProducer(t, c, client.WithTransactionalID("client-txn"))
	if !p.Transactional() {
		t.Fatal("not transactional")
	}
	if err := p.Produce(ctx, &client.Record{Topic: "txn", Value: []byte("outside")}, nil); !errors.Is(err, client.ErrNoTransaction) {
		t.Fatalf("produce outside a transaction: %v", err)
	}
	run := func(prefix string, n int, commit bool) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := p.Produce(ctx, &client.Record{Topic: "txn", Value: fmt.Appendf(nil, "%s-%d", prefix, i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		end := p.AbortTransaction
		if commit {
			end = p.CommitTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatalf("end %s: %v", prefix, err)
		}
	}
	run("a", 10, true)
	run("b", 5, false)
	run("c", 3, true)

	read := func(readCommitted bool, want int) []string {
		var opts []client.ConsumerOption
		if readCommitted {
			opts = append(opts, client.WithReadCommitted())
		}
		consumer := newConsumer(t, newClient(t, address), opts...)
		assignAll(t, consumer, "txn", 3, client.AtStart())
		var values []string
		for _, r := range pollN(t, consumer, want) {
			values = append(values, string(r.Value))
		}
		return values
	}
	for _, v := range read(true, 13) {
		if strings.HasPrefix(v, "b-") {
			t.Fatalf("read_committed returned aborted record %s", v)
		}
	}
	aborted := 0
	for _, v := range read(false, 18) {
		if strings.HasPrefix(v, "b-") {
			aborted++
		}
	}
	if aborted != 5 {
		t.Fatalf("read_uncommitted returned %d aborted records, want 5", aborted)
	}

	// Fencing: a new instance takes over; the old one's transaction cannot commit.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "txn", Value: []byte("zombie")}); err != nil {
		t.Fatal(err)
	}
	successor := newProducer(t, newClient(t, address), client.WithTransactionalID("client-txn"))
	if err := successor.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := successor.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("commit of a fenced producer: %v", err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, client.ErrProducerFenced) {
		t.Fatalf("begin after being fenced: %v", err)
	}
}
