package main

// Transactions in a three-node cluster: partitions led by several brokers (markers travel with
// WriteTxnMarkers), and the transaction coordinator's node killed with SIGKILL mid-stream. Another
// broker takes the transactional id over from the Raft state; every transaction ends wholly visible
// or wholly invisible to read_committed readers.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// transactionCoordinator asks FindCoordinator which node coordinates a transactional id.
func transactionCoordinator(t *testing.T, client *kgo.Client, id string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey = 1, id
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("find transaction coordinator of %s: %v (error %d)", id, err, resp.ErrorCode)
	}
	return resp.NodeID
}

func TestClusterTransactionsSurviveCoordinatorKill(t *testing.T) {
	const topic, partitions, perTxn, id = "txn-cluster", 6, 24, "cluster-stream"
	c := startCluster(t, 3, "--transaction-check-interval", "100ms")
	admin := clusterClient(t, c)
	createReplicatedTopic(t, admin, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	awaitFullISR(t, admin, topic, 20*time.Second)

	victim := transactionCoordinator(t, admin, id)
	newProducer := func() *kgo.Client {
		return clusterClient(t, c, kgo.TransactionalID(id), kgo.TransactionTimeout(3*time.Second),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RequestRetries(100), kgo.RetryTimeout(30*time.Second))
	}
	producer := newProducer()
	restarts := 0
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var mu sync.Mutex
	outcome := map[string]string{}
	killed := make(chan struct{})
	var failures []string
	for k := 0; k < 60; k++ {
		if k == 20 {
			go func() {
				c.Node(victim).Kill()
				close(killed)
			}()
		}
		prefix := fmt.Sprintf("t%d", k)
		commit := k%4 != 3
		mu.Lock()
		outcome[prefix] = "unknown"
		mu.Unlock()
		err := runTransaction(ctx, producer, topic, prefix, perTxn, commit)
		mu.Lock()
		switch {
		case err == nil && commit:
			outcome[prefix] = "committed"
		case err == nil:
			outcome[prefix] = "aborted"
		default:
			failures = append(failures, fmt.Sprintf("%s: %v", prefix, err))
		}
		mu.Unlock()
		if err != nil && restarts < 5 {
			// franz-go makes some errors fatal to a producer instance (a coordinator named by a
			// broker whose view still had the dead node, then missing from the next metadata:
			// "unknown broker"); an application restarts its producer, which fences the old one.
			producer.Close()
			producer = newProducer()
			restarts++
		}
		if err != nil && ctx.Err() != nil {
			t.Fatalf("transactions stalled after the kill of node %d: %v", victim, failures)
		}
	}
	<-killed
	committedAfterKill := 0
	for k := 21; k < 60; k++ {
		if outcome[fmt.Sprintf("t%d", k)] == "committed" {
			committedAfterKill++
		}
	}
	if committedAfterKill == 0 {
		t.Fatalf("no transaction committed after the coordinator (node %d) died: %v", victim, failures)
	}
	if err := c.Node(victim).Start(); err != nil {
		t.Fatal(err)
	}
	awaitFullISR(t, admin, topic, 60*time.Second)
	address := c.Bootstrap()[0]
	awaitStable(t, admin, topic, partitions, 30*time.Second)
	produceEndMarks(t, address, topic, partitions)
	counts := map[string]int{}
	for _, v := range readToEndMarks(t, address, topic, partitions, true) {
		prefix, _, _ := strings.Cut(v, "-")
		counts[prefix]++
	}
	for prefix, state := range outcome {
		got := counts[prefix]
		switch {
		case got != 0 && got != perTxn:
			t.Errorf("transaction %s (%s) partly visible: %d of %d records", prefix, state, got, perTxn)
		case state == "committed" && got != perTxn:
			t.Errorf("acknowledged commit %s: %d of %d records visible", prefix, got, perTxn)
		case state == "aborted" && got != 0:
			t.Errorf("aborted transaction %s: %d records visible", prefix, got)
		}
	}
	t.Logf("coordinator node %d killed after 20 transactions; %d committed after; %d producer restarts; failures: %v", victim, committedAfterKill, restarts, failures)
}
