package client_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// A worker pool on a share group: one ShareConsumer fetches, four goroutines process records and
// acknowledge each one as they finish: Accept when done, Release to have it delivered again (to
// any member), Reject when it can never succeed.
func ExampleShareConsumer() {
	address, stop := exampleBroker()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _ := client.New(client.WithSeedBrokers(address))
	defer c.Close()
	admin := client.NewAdmin(c)
	admin.CreateTopics(ctx, client.TopicSpec{Name: "emails", Partitions: 1, ReplicationFactor: 1})
	admin.AlterGroupConfigs(ctx, "mailers", client.SetConfig("share.auto.offset.reset", "earliest"))
	p, _ := client.NewProducer(ctx, c)
	for _, to := range []string{"ann@example.com", "bob@example.com", "not-an-address", "cy@example.com"} {
		p.ProduceSync(ctx, &client.Record{Topic: "emails", Value: []byte(to)})
	}
	p.Close(ctx)

	consumer, _ := client.NewShareConsumer(c, "mailers", []string{"emails"})
	jobs := make(chan *client.ShareRecord)
	var mu sync.Mutex
	var sent []string
	var workers sync.WaitGroup
	for range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for r := range jobs {
				if !strings.Contains(string(r.Value), "@") {
					r.Reject() // archived: never delivered again
					continue
				}
				mu.Lock()
				sent = append(sent, string(r.Value))
				mu.Unlock()
				r.Accept()
			}
		}()
	}
	for handled := 0; handled < 4; {
		records, err := consumer.Poll(ctx)
		if err != nil {
			break
		}
		for _, r := range records {
			jobs <- r
		}
		handled += len(records)
	}
	close(jobs)
	workers.Wait()
	consumer.Close(ctx) // sends the last acknowledgements and leaves the group
	sort.Strings(sent)
	fmt.Println(sent)
	// Output: [ann@example.com bob@example.com cy@example.com]
}
