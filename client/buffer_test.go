package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// bufferedRecord is charged exactly 100 bytes against the producer buffer (value plus overhead).
func bufferedRecord(topic string) *client.Record {
	return &client.Record{Topic: topic, Partition: 0, Value: make([]byte, 76)}
}

// TestBufferFullError: with WithBufferFullError, Produce fails at once when the buffer is full and
// works again once Flush has emptied it.
func TestBufferFullError(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "full", 1)
	p := newProducer(t, c, client.WithMaxBufferedBytes(1000), client.WithBufferFullError(), client.WithLinger(time.Hour))
	ctx := context.Background()
	var delivered atomic.Int64
	callback := func(_ *client.Record, err error) {
		if err != nil {
			t.Errorf("delivery: %v", err)
		}
		delivered.Add(1)
	}
	for i := 0; i < 10; i++ {
		if err := p.Produce(ctx, bufferedRecord("full"), callback); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := p.Produce(ctx, bufferedRecord("full"), callback); !errors.Is(err, client.ErrBufferFull) {
		t.Fatalf("11th record: %v, want ErrBufferFull", err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if delivered.Load() != 10 || p.BufferedRecords() != 0 {
		t.Fatalf("delivered %d, buffered %d after flush", delivered.Load(), p.BufferedRecords())
	}
	if err := p.Produce(ctx, bufferedRecord("full"), callback); err != nil {
		t.Fatalf("after flush: %v", err)
	}
}

// TestBufferFullBlocks: by default Produce waits for room; its context bounds the wait, and room
// freed by a flush lets a waiting Produce through.
func TestBufferFullBlocks(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "blocks", 1)
	p := newProducer(t, c, client.WithMaxBufferedBytes(1000), client.WithLinger(time.Hour))
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		if err := p.Produce(ctx, bufferedRecord("blocks"), nil); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.Produce(short, bufferedRecord("blocks"), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Produce on a full buffer: %v, want the context's deadline", err)
	}

	delivered := make(chan error, 1)
	accepted := make(chan error, 1)
	go func() {
		accepted <- p.Produce(ctx, bufferedRecord("blocks"), func(_ *client.Record, err error) { delivered <- err })
	}()
	// The waiting Produce gets in once the flush frees the buffer.
	flushCtx, cancelFlush := context.WithTimeout(ctx, 30*time.Second)
	defer cancelFlush()
	if err := p.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("waiting Produce: %v", err)
	}
	if err := p.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	if err := <-delivered; err != nil {
		t.Fatal(err)
	}
}

// TestCloseReportsUndelivered: a producer closed with no time to flush (its batches linger for an
// hour, Close's context is already over) reports every record to its callback with ErrClosed.
func TestCloseReportsUndelivered(t *testing.T) {
	address := startBroker(t)
	c := newClient(t, address)
	createTopic(t, c, "undelivered", 2)
	ctx := context.Background()
	p, err := client.NewProducer(ctx, c, client.WithLinger(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var failed, succeeded atomic.Int64
	for i := 0; i < 100; i++ {
		err := p.Produce(ctx, &client.Record{Topic: "undelivered", Key: []byte{byte(i)}}, func(_ *client.Record, err error) {
			if errors.Is(err, client.ErrClosed) {
				failed.Add(1)
			} else if err == nil {
				succeeded.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	expired, cancel := context.WithCancel(ctx)
	cancel() // no time to flush: everything must be reported failed
	err = p.Close(expired)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v", err)
	}
	if failed.Load()+succeeded.Load() != 100 {
		t.Fatalf("%d failed and %d succeeded of 100", failed.Load(), succeeded.Load())
	}
	if err := p.Produce(ctx, &client.Record{Topic: "undelivered"}, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Produce after Close: %v", err)
	}
}
