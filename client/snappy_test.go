package client_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

// TestConsumerReadsSnappyFromFranz: batches franz-go compressed with snappy (its default codec)
// decode.
func TestConsumerReadsSnappyFromFranz(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "snappy", 1)
	producer, err := kgo.NewClient(kgo.SeedBrokers(address), kgo.DefaultProduceTopic("snappy"),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var records []*kgo.Record
	for i := range 1000 {
		records = append(records, &kgo.Record{Value: []byte("a compressible value " + strconv.Itoa(i))})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer := newConsumer(t, c)
	assignAll(t, consumer, "snappy", 1, client.AtStart())
	got := pollN(t, consumer, 1000)
	for i, r := range got {
		if want := "a compressible value " + strconv.Itoa(i); string(r.Value) != want {
			t.Fatalf("record %d: %q, want %q", i, r.Value, want)
		}
	}
}
