package client_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// TestShareConsumersSplitAndAcknowledge: three share consumers of one group accept every record
// exactly once between them, except every tenth, which they reject; rejected records are never
// delivered again, and DescribeShareGroup reports the members and no lag once done.
func TestShareConsumersSplitAndAcknowledge(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "jobs", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := client.NewAdmin(c)
	if err := admin.AlterGroupConfigs(ctx, "workers", client.SetConfig("share.auto.offset.reset", "earliest")); err != nil {
		t.Fatal(err)
	}
	const total = 5000
	p := newProducer(t, c, client.WithLinger(time.Millisecond))
	for i := range total {
		if err := p.Produce(ctx, &client.Record{Topic: "jobs", Value: []byte(strconv.Itoa(i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	delivered := map[string]int{}
	done := make(chan struct{})
	finished := 0
	var consumers []*client.ShareConsumer
	for range 3 {
		consumer, err := client.NewShareConsumer(newClient(t, address), "workers", []string{"jobs"})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, consumer)
		go func() {
			for {
				records, err := consumer.Poll(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				for _, r := range records {
					delivered[string(r.Value)]++
					if n, _ := strconv.Atoi(string(r.Value)); n%10 == 0 {
						r.Reject()
					} else {
						r.Accept()
					}
				}
				if len(delivered) == total && finished == 0 {
					finished++
					close(done)
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("%d of %d records delivered", len(delivered), total)
	}
	description, err := admin.DescribeShareGroup(ctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if len(description.Members) != 3 || description.State != "Stable" {
		t.Errorf("described %+v", description)
	}
	for _, consumer := range consumers {
		if err := consumer.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for value, n := range delivered {
		if n != 1 {
			t.Errorf("record %s delivered %d times", value, n)
		}
	}
	// Once the closes' acknowledgements are in, nothing is left to do.
	for {
		description, err = admin.DescribeShareGroup(ctx, "workers")
		if err != nil {
			t.Fatal(err)
		}
		lag := int64(0)
		for _, p := range description.Partitions {
			lag += p.Lag
		}
		if len(description.Partitions) == 2 && lag == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("share partitions: %+v", description.Partitions)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition the broker reaches asynchronously
	}
}
