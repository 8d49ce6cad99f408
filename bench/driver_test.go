package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/broker/brokertest"
)

// startBroker runs an in-process broker on ephemeral ports and returns its Kafka address.
func startBroker(t testing.TB) string {
	t.Helper()
	return brokertest.Start(t, nil).Addr().String()
}

// TestConsumersShareTheirGroup runs two consumers of one group through each driver: the broker's
// group coordinator must give both of them partitions, and between them they must read every
// record once, including the records written before they joined (a fresh group starts at the log
// start).
func TestConsumersShareTheirGroup(t *testing.T) {
	address := startBroker(t)
	for _, name := range Drivers {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			driver, err := NewDriver(name, []string{address}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer driver.Close()
			topic := "share-" + name
			if err := driver.CreateTopic(ctx, topic, 4, -1, nil); err != nil {
				t.Fatal(err)
			}
			w := DefaultWorkload()
			w.Keys, w.Linger = "random", time.Millisecond
			stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			producer, err := driver.NewProducer(ctx, w, func(sent time.Time, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
				if !sent.Equal(stamp) {
					t.Errorf("done got timestamp %v, Send gave %v", sent, stamp)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			const records = 200
			send := func(from, to int) {
				for i := from; i < to; i++ {
					value := make([]byte, MinMessageSize)
					binary.BigEndian.PutUint64(value[8:], uint64(i))
					err := producer.Send(ctx, topic, fmt.Appendf(nil, "key-%d", i), value, stamp)
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			send(0, records/2)

			var mu sync.Mutex
			seen := map[uint64]int{}
			var perConsumer [2]int
			everything := make(chan struct{})
			var consumers []Consumer
			for i := range perConsumer {
				c, err := driver.NewConsumer(ctx, topic, GroupID(topic, 0), func(value []byte, _ time.Time) {
					mu.Lock()
					defer mu.Unlock()
					seen[binary.BigEndian.Uint64(value[8:])]++
					perConsumer[i]++
					if len(seen) == records && perConsumer[0]+perConsumer[1] == records {
						close(everything)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				consumers = append(consumers, c)
			}
			defer func() {
				for _, c := range consumers {
					if err := c.Close(); err != nil {
						t.Errorf("close consumer: %v", err)
					}
				}
			}()
			if err := awaitAssigned(ctx, consumers, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			send(records/2, records)
			if err := producer.Close(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-everything:
			case <-ctx.Done():
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("read %d distinct of %d records (%v per consumer)", len(seen), records, perConsumer)
			}
			mu.Lock()
			defer mu.Unlock()
			if perConsumer[0] == 0 || perConsumer[1] == 0 {
				t.Fatalf("records per consumer %v: the group did not share the partitions", perConsumer)
			}
		})
	}
}
