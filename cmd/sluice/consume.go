package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/client"
)

const consumeDescription = `Read records of TOPIC to stdout.

Where to start (per partition): --from-beginning, --from-end (the default: only new records),
--offset N, or --from-time (an RFC 3339 time, or a duration meaning that long ago: --from-time 15m).
When to stop: after --count records, at the end of the log as it was when consuming began
(--exit-at-end), or on Ctrl-C.

Formats: plain (the value), kv (key, separator, value), json (one object per line with topic,
partition, offset, timestamp, key, value and headers; bytes that are not UTF-8 come as
key_base64/value_base64).

With --group G, partitions start at G's committed offsets (the --from flags apply to partitions
without one) and the offsets of the records written out are committed every 5 s and on exit, so
that "sluice group describe G" shows the lag. This reads as a simple (unassigned) member: it does
not join the group, so two processes with the same --group both read every partition, and the
broker refuses the commits while the group has active members.

Examples:
  sluice consume orders --from-beginning --count 10
  sluice consume orders --group billing --format json --exit-at-end`

func runConsume(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice consume", "TOPIC [flags]", consumeDescription)
	fromBeginning := fs.Bool("from-beginning", false, "start at the earliest record")
	fromEnd := fs.Bool("from-end", false, "start after the last record (the default)")
	offset := fs.Int64("offset", -1, "start at this offset")
	fromTime := fs.String("from-time", "", "start at the first record at or after this time (RFC 3339, or a duration ago such as 15m)")
	partitionList := fs.String("partitions", "", "comma-separated partitions to read (default: all)")
	groupID := fs.String("group", "", "consumer group whose committed offsets to start from and commit to")
	count := fs.Int64("count", 0, "stop after this many records (0: no limit)")
	exitAtEnd := fs.Bool("exit-at-end", false, "stop at the end of the log as it was when consuming began")
	fs.BoolVar(exitAtEnd, "e", false, "short for --exit-at-end")
	format := fs.String("format", "plain", "output format: plain, kv or json")
	separator := fs.String("key-separator", "\t", "separator between key and value for --format kv")
	positional, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	topic := positional[0]
	if *format != "plain" && *format != "kv" && *format != "json" {
		return usageErrorf(fs.name, "--format %q: want plain, kv or json", *format)
	}
	if fs.globals.json {
		*format = "json"
	}
	start := client.AtEnd()
	chosen := 0
	if *fromBeginning {
		start, chosen = client.AtStart(), chosen+1
	}
	if *fromEnd {
		chosen++
	}
	if *offset >= 0 {
		start, chosen = client.AtOffset(*offset), chosen+1
	}
	if *fromTime != "" {
		at, err := parseTime(*fromTime)
		if err != nil {
			return usageErrorf(fs.name, "--from-time %q: want an RFC 3339 time (2024-05-01T12:00:00Z) or a duration ago (15m)", *fromTime)
		}
		start, chosen = client.AtTime(at), chosen+1
	}
	if chosen > 1 {
		return usageErrorf(fs.name, "give at most one of --from-beginning, --from-end, --offset and --from-time")
	}
	if *count < 0 {
		return usageErrorf(fs.name, "--count must not be negative")
	}

	s, err := connect(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer s.Close()
	rctx, cancel := s.requestContext(ctx)
	defer cancel()
	described, err := s.admin().DescribeTopics(rctx, topic)
	if errors.Is(err, client.ErrUnknownTopic) {
		return topicNotFound(topic)
	} else if err != nil {
		return err
	}
	var partitions []int32
	if *partitionList == "" {
		for _, p := range described[0].Partitions {
			partitions = append(partitions, p.Partition)
		}
	} else {
		for _, field := range strings.Split(*partitionList, ",") {
			p, err := strconv.ParseInt(strings.TrimSpace(field), 10, 32)
			if err != nil || p < 0 || int(p) >= len(described[0].Partitions) {
				return usageErrorf(fs.name, "--partitions: %q is not a partition of %s (it has %d)", field, topic, len(described[0].Partitions))
			}
			partitions = append(partitions, int32(p))
		}
	}

	var group *groupOffsets
	committed := map[int32]int64{}
	if *groupID != "" {
		group = &groupOffsets{session: s, group: *groupID, topic: topic}
		if committed, err = group.fetch(rctx); err != nil {
			return err
		}
	}
	assignments := make([]client.Assignment, 0, len(partitions))
	for _, p := range partitions {
		a := client.Assignment{Topic: topic, Partition: p, Offset: start}
		if offset, ok := committed[p]; ok {
			a.Offset = client.AtOffset(offset)
		}
		assignments = append(assignments, a)
	}
	var ends map[int32]client.ListedOffset
	if *exitAtEnd {
		if ends, err = s.admin().ListOffsets(rctx, topic, client.AtEnd(), partitions...); err != nil {
			return err
		}
	}
	consumer, err := client.NewConsumer(s.client)
	if err != nil {
		return err
	}
	defer consumer.Close()
	if err := consumer.Assign(rctx, assignments...); err != nil {
		return err
	}
	// next[p] is the offset after the last record written out: what a group commits.
	next := map[int32]int64{}
	for _, p := range partitions {
		position, err := consumer.Position(client.TopicPartition{Topic: topic, Partition: p})
		if err != nil {
			return err
		}
		next[p] = position
	}
	caughtUp := func() bool {
		if ends == nil {
			return false
		}
		for _, p := range partitions {
			if next[p] < ends[p].Offset {
				return false
			}
		}
		return true
	}

	out := bufio.NewWriterSize(io.out, 64<<10)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	var written int64
	lastCommit := time.Now()
	commit := func() error {
		if group == nil {
			return nil
		}
		commitCtx, cancel := context.WithTimeout(context.Background(), fs.globals.timeout)
		defer cancel()
		return group.commit(commitCtx, next)
	}
	done := func() bool { return (*count > 0 && written >= *count) || caughtUp() }
	for !done() {
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		fetches, err := consumer.Poll(pollCtx)
		cancelPoll()
		if ctx.Err() != nil {
			break // Ctrl-C: commit what was written and stop cleanly
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
		if err != nil {
			return err
		}
		for _, f := range fetches {
			if f.Err != nil {
				out.Flush()
				commit()
				return fmt.Errorf("consume %s-%d: %w", f.Topic, f.Partition, f.Err)
			}
			for _, r := range f.Records {
				if *count > 0 && written >= *count {
					break
				}
				if err := writeRecord(out, encoder, *format, *separator, r); err != nil {
					return err
				}
				written++
				next[r.Partition] = r.Offset + 1
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if group != nil && time.Since(lastCommit) >= 5*time.Second {
			if err := commit(); err != nil {
				return err
			}
			lastCommit = time.Now()
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return commit()
}

// parseTime reads an RFC 3339 time or a duration meaning that long ago.
func parseTime(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// jsonRecord is a record as --format json writes it.
type jsonRecord struct {
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Timestamp   string            `json:"timestamp"`
	Key         *string           `json:"key"`
	KeyBase64   string            `json:"key_base64,omitempty"`
	Value       *string           `json:"value"`
	ValueBase64 string            `json:"value_base64,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
}

func writeRecord(out *bufio.Writer, encoder *json.Encoder, format, separator string, r *client.Record) error {
	switch format {
	case "plain":
		out.Write(r.Value)
		return out.WriteByte('\n')
	case "kv":
		out.Write(r.Key)
		out.WriteString(separator)
		out.Write(r.Value)
		return out.WriteByte('\n')
	}
	j := jsonRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano)}
	j.Key, j.KeyBase64 = textOrBase64(r.Key)
	j.Value, j.ValueBase64 = textOrBase64(r.Value)
	if len(r.Headers) > 0 {
		j.Headers = map[string]string{}
		for _, h := range r.Headers {
			j.Headers[h.Key] = string(h.Value)
		}
	}
	return encoder.Encode(j)
}

func textOrBase64(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}
