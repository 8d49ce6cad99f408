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

Where to start (per partition): --from-beginning, --from-end (the default without --group: only new records),
--offset N, or --from-time (an RFC 3339 time, or a duration meaning that long ago: --from-time 15m).
When to stop: after --count records, at the end of the log as it was when consuming began
(--exit-at-end), or on Ctrl-C.

Formats: plain (the value), kv (key, separator, value), json (one object per line with topic,
partition, offset, timestamp, key, value and headers; bytes that are not UTF-8 come as
key_base64/value_base64).

With --share-group G, sluice is one member of share group G: any number of members split the topic's
records (not partitions) between them, each record is written out by one member and then accepted
(acknowledged); records a member took but did not accept (it was killed) go to another after the
group's share.record.lock.duration.ms. --from-beginning sets the group's share.auto.offset.reset to
earliest (for partitions it has not read yet); --exit-at-end stops once a fetch finds nothing left.

With --group G, sluice joins consumer group G: the group shares the topic's partitions among its
members, each partition starts at G's committed offset (partitions without one start at the
earliest record, or where a --from flag says), and the offsets of the records written out are committed every 5 s and when sluice
leaves the group on exit, so "sluice group describe G" shows the lag.

Examples:
  sluice consume orders --from-beginning --count 10
  sluice consume orders --group billing --format json --exit-at-end
  sluice consume jobs --share-group workers --from-beginning`

func runConsume(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice consume", "TOPIC [flags]", consumeDescription)
	fromBeginning := fs.Bool("from-beginning", false, "start at the earliest record")
	fromEnd := fs.Bool("from-end", false, "start after the last record (the default, except with --group)")
	offset := fs.Int64("offset", -1, "start at this offset")
	fromTime := fs.String("from-time", "", "start at the first record at or after this time (RFC 3339, or a duration ago such as 15m)")
	partitionList := fs.String("partitions", "", "comma-separated partitions to read (default: all)")
	groupID := fs.String("group", "", "consumer group whose committed offsets to start from and commit to")
	shareGroup := fs.String("share-group", "", "read as a member of this share group, accepting each record once written out")
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
	if *shareGroup != "" {
		if *groupID != "" || *partitionList != "" || *offset >= 0 || *fromTime != "" {
			return usageErrorf(fs.name, "--share-group takes no --group, --partitions, --offset or --from-time: the group decides what each member reads")
		}
		return shareConsume(ctx, fs.globals, io, topic, *shareGroup, *format, *separator, *count, *exitAtEnd, *fromBeginning)
	}
	if *groupID != "" && chosen == 0 {
		start = client.AtStart() // a group reads what it has not read yet, from the earliest record
	}
	if *count < 0 {
		return usageErrorf(fs.name, "--count must not be negative")
	}

	s, rctx, release, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer release()
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

	if *groupID != "" && *partitionList != "" {
		return usageErrorf(fs.name, "--partitions cannot be combined with --group: the group assigns partitions")
	}
	var ends map[int32]client.ListedOffset
	if *exitAtEnd {
		if ends, err = s.admin().ListOffsets(rctx, topic, client.AtEnd(), partitions...); err != nil {
			return err
		}
	}
	var source recordSource
	// next[p] is the offset after the last record written out (or the start offset).
	next := map[int32]int64{}
	if *groupID != "" {
		// Where each partition stands before joining: its committed offset, else the start the
		// flags choose. Only used to tell when --exit-at-end is reached.
		committed, err := (&groupOffsets{session: s, group: *groupID, topic: topic}).fetch(rctx)
		if err != nil {
			return err
		}
		starts, err := s.admin().ListOffsets(rctx, topic, start, partitions...)
		if err != nil {
			return err
		}
		for _, p := range partitions {
			next[p] = starts[p].Offset
			if offset, ok := committed[p]; ok {
				next[p] = offset
			}
		}
		member, err := client.NewGroupConsumer(s.client, *groupID, []string{topic}, client.WithResetOffset(start), client.WithAutoCommitMarks())
		if err != nil {
			return err
		}
		source = &groupSource{member: member, timeout: fs.globals.timeout}
	} else {
		consumer, err := client.NewConsumer(s.client)
		if err != nil {
			return err
		}
		assignments := make([]client.Assignment, 0, len(partitions))
		for _, p := range partitions {
			assignments = append(assignments, client.Assignment{Topic: topic, Partition: p, Offset: start})
		}
		if err := consumer.Assign(rctx, assignments...); err != nil {
			consumer.Close()
			return err
		}
		for _, p := range partitions {
			if next[p], err = consumer.Position(client.TopicPartition{Topic: topic, Partition: p}); err != nil {
				consumer.Close()
				return err
			}
		}
		source = &assignedSource{consumer: consumer, partitions: partitions}
	}
	defer source.close()
	caughtUp := func() bool {
		if ends == nil {
			return false
		}
		mine := source.assigned()
		if len(mine) == 0 {
			return false // a group member not yet given partitions
		}
		for _, p := range mine {
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
	done := func() bool { return (*count > 0 && written >= *count) || caughtUp() }
	for !done() {
		pollCtx, cancelPoll := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches, err := source.poll(pollCtx)
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
				return fmt.Errorf("consume %s-%d: %w", f.Topic, f.Partition, f.Err)
			}
			for _, r := range f.Records {
				if *count > 0 && written >= *count {
					break
				}
				if err := writeRecord(out, encoder, *format, *separator, r); err != nil {
					return err
				}
				source.written(r)
				written++
				next[r.Partition] = r.Offset + 1
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return source.close()
}

// recordSource is where consume reads: assigned partitions, or a group member.
type recordSource interface {
	poll(ctx context.Context) ([]client.Fetch, error)
	written(r *client.Record) // r was written out: a group commits past it
	assigned() []int32
	close() error // a group commits what was written and leaves; idempotent
}

type assignedSource struct {
	consumer   *client.Consumer
	partitions []int32
	closed     bool
}

func (a *assignedSource) poll(ctx context.Context) ([]client.Fetch, error) {
	return a.consumer.Poll(ctx)
}
func (a *assignedSource) written(*client.Record) {}
func (a *assignedSource) assigned() []int32      { return a.partitions }
func (a *assignedSource) close() error {
	if !a.closed {
		a.closed = true
		a.consumer.Close()
	}
	return nil
}

// groupSource is a member of the consumer group: the group assigns its partitions, and it
// commits the offsets of the records written out (marks), every 5 s and when it leaves.
type groupSource struct {
	member  *client.GroupConsumer
	timeout time.Duration
	closed  bool
}

func (g *groupSource) poll(ctx context.Context) ([]client.Fetch, error) { return g.member.Poll(ctx) }
func (g *groupSource) written(r *client.Record)                         { g.member.MarkRecords(r) }
func (g *groupSource) assigned() []int32 {
	var out []int32
	for _, tp := range g.member.Assigned() {
		out = append(out, tp.Partition)
	}
	return out
}
func (g *groupSource) close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if err := g.member.Close(ctx); err != nil {
		return fmt.Errorf("leaving the group: %w", err)
	}
	return nil
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
