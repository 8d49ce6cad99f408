package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/bench"
	"github.com/sluice-mq/sluice/client"
)

func runProduce(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice produce", "TOPIC [flags]", `Write records to TOPIC: one record per input line (stdin, or --file), the line as the value.
With --key-separator, the text before the first separator is the key.
Examples:
  seq 1 10 | sluice produce orders
  sluice produce orders --file events.txt --key-separator : --acks 1`)
	file := fs.String("file", "", "read lines from this file instead of stdin")
	keySeparator := fs.String("key-separator", "", "split each line into key and value at the first occurrence of this string")
	acks := fs.String("acks", "all", "acknowledgement: 0 (none), 1 (leader wrote it) or all (durable on every in-sync replica)")
	compression := fs.String("compression", "none", "batch compression: none or zstd")
	linger := fs.Duration("linger", 5*time.Millisecond, "how long a batch waits for more records")
	var headers stringList
	fs.Var(&headers, "header", "a header added to every record, `key=value` (repeatable)")
	maxLine := fs.Int("max-line-bytes", 1<<20, "longest input line accepted")
	positional, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	topic := positional[0]
	ackLevel, err := bench.ParseAcks(*acks)
	if err != nil {
		return usageErrorf(fs.name, "--%v", err)
	}
	opts := []client.ProducerOption{client.WithAcks(client.Acks(ackLevel)), client.WithLinger(*linger), client.WithDeliveryTimeout(fs.globals.timeout)}
	switch *compression {
	case "none":
	case "zstd":
		opts = append(opts, client.WithCompression(client.CompressionZstd))
	default:
		return usageErrorf(fs.name, "--compression %q: want none or zstd", *compression)
	}
	headerMap, err := keyValues("header", headers)
	if err != nil {
		return usageErrorf(fs.name, "%v", err)
	}
	var recordHeaders []client.Header
	for k, v := range headerMap {
		recordHeaders = append(recordHeaders, client.Header{Key: k, Value: []byte(v)})
	}
	input := io.in
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		input = f
	}

	s, err := connect(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer s.Close()
	rctx, cancel := s.requestContext(ctx)
	_, err = s.admin().DescribeTopics(rctx, topic)
	cancel()
	if errors.Is(err, client.ErrUnknownTopic) {
		return topicNotFound(topic)
	} else if err != nil {
		return err
	}
	producer, err := client.NewProducer(ctx, s.client, opts...)
	if err != nil {
		return err
	}
	var delivered, failed atomic.Int64
	var firstErr struct {
		sync.Mutex
		err error
	}
	callback := func(_ *client.Record, err error) {
		if err == nil {
			delivered.Add(1)
			return
		}
		failed.Add(1)
		firstErr.Lock()
		if firstErr.err == nil {
			firstErr.err = err
		}
		firstErr.Unlock()
	}
	scanner := bufio.NewScanner(input)
	scanner.Buffer(make([]byte, 64<<10), *maxLine)
	var readErr error
	for scanner.Scan() {
		line := scanner.Bytes()
		record := &client.Record{Topic: topic, Headers: recordHeaders}
		if *keySeparator != "" {
			if key, value, ok := strings.Cut(string(line), *keySeparator); ok {
				record.Key, record.Value = []byte(key), []byte(value)
			} else {
				record.Value = append([]byte(nil), line...)
			}
		} else {
			record.Value = append([]byte(nil), line...)
		}
		if err := producer.Produce(ctx, record, callback); err != nil {
			readErr = err
			break
		}
	}
	if err := scanner.Err(); err != nil && readErr == nil {
		readErr = fmt.Errorf("reading input: %w (see --max-line-bytes)", err)
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), fs.globals.timeout)
	defer cancelClose()
	closeErr := producer.Close(closeCtx)
	if fs.globals.json {
		writeJSON(io.out, map[string]any{"topic": topic, "delivered": delivered.Load(), "failed": failed.Load()})
	}
	switch {
	case readErr != nil:
		return readErr
	case failed.Load() > 0:
		firstErr.Lock()
		defer firstErr.Unlock()
		return fmt.Errorf("%d of %d records not delivered, first: %w", failed.Load(), failed.Load()+delivered.Load(), firstErr.err)
	case closeErr != nil:
		return closeErr
	}
	if !fs.globals.json {
		fmt.Fprintf(io.err, "produced %d records to %s\n", delivered.Load(), topic)
	}
	return nil
}
