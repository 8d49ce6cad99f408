package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/protocol"
)

const topicHelp = `Usage: sluice topic <create|list|describe|delete|alter|trim> [arguments] [flags]

Manage topics.

  sluice topic create NAME [--partitions N] [--replication-factor N] [--config key=value]...
  sluice topic list [--internal]
  sluice topic describe NAME...
  sluice topic delete NAME... [--if-exists]
  sluice topic alter NAME [--set key=value]... [--delete key]... [--partitions N]
  sluice topic trim NAME --partition P --before OFFSET

Run "sluice topic <subcommand> --help" for its flags.
`

func runTopic(ctx context.Context, args []string, io streams) error {
	verb, rest, err := subcommand("topic", args, []string{"create", "list", "describe", "delete", "alter", "trim"}, io, topicHelp)
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		return topicCreate(ctx, rest, io)
	case "list":
		return topicList(ctx, rest, io)
	case "describe":
		return topicDescribe(ctx, rest, io)
	case "delete":
		return topicDelete(ctx, rest, io)
	case "trim":
		return topicTrim(ctx, rest, io) // topic_trim.go
	default:
		return topicAlter(ctx, rest, io)
	}
}

func topicCreate(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice topic create", "NAME [flags]", `Create a topic. Partitions and replication factor of -1 take the broker's defaults.
Example: sluice topic create orders --partitions 3 --config retention.ms=86400000`)
	partitions := fs.Int("partitions", -1, "number of partitions (-1: the broker's default)")
	replication := fs.Int("replication-factor", -1, "copies of each partition (-1: the broker's default)")
	var configs stringList
	fs.Var(&configs, "config", "topic config as `key=value` (repeatable), e.g. retention.ms=3600000")
	ifNotExists := fs.Bool("if-not-exists", false, "succeed if the topic already exists")
	positional, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	if *partitions == 0 || *partitions < -1 || *replication == 0 || *replication < -1 || *replication > 1<<15-1 {
		return usageErrorf(fs.name, "--partitions and --replication-factor must be positive, or -1 for the broker's default")
	}
	settings, err := keyValues("config", configs)
	if err != nil {
		return usageErrorf(fs.name, "%v", err)
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	name := positional[0]
	err = s.admin().CreateTopics(rctx, client.TopicSpec{Name: name, Partitions: int32(*partitions), ReplicationFactor: int16(*replication), Configs: settings})
	created := err == nil
	if errors.Is(err, protocol.TopicAlreadyExists) {
		if !*ifNotExists {
			return fmt.Errorf("topic %q already exists (use --if-not-exists to accept that, or sluice topic describe %s)", name, name)
		}
		err = nil
	}
	if err != nil {
		return err
	}
	if fs.globals.json {
		return writeJSON(io.out, map[string]any{"topic": name, "created": created})
	}
	if created {
		fmt.Fprintf(io.out, "created topic %s\n", name)
	} else {
		fmt.Fprintf(io.out, "topic %s already exists\n", name)
	}
	return nil
}

func topicList(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice topic list", "[flags]", "List topics with their partition counts.")
	internal := fs.Bool("internal", false, "include internal topics (__consumer_offsets)")
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	names, err := s.admin().ListTopics(rctx, *internal)
	if err != nil {
		return err
	}
	type topicRow struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
		Internal   bool   `json:"internal,omitempty"`
	}
	rows := []topicRow{}
	if len(names) > 0 {
		described, err := s.admin().DescribeTopics(rctx, names...)
		if err != nil {
			return err
		}
		for _, d := range described {
			rows = append(rows, topicRow{Name: d.Name, Partitions: len(d.Partitions), Internal: d.Internal})
		}
	}
	if fs.globals.json {
		return writeJSON(io.out, rows)
	}
	t := newTable(io.out, "topic", "partitions")
	for _, r := range rows {
		t.row(r.Name, r.Partitions)
	}
	return t.flush()
}

// describedTopic is the JSON form of sluice topic describe.
type describedTopic struct {
	Name       string               `json:"name"`
	Internal   bool                 `json:"internal"`
	Partitions []describedPartition `json:"partitions"`
	Configs    map[string]string    `json:"configs"`
}

type describedPartition struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	StartOffset int64   `json:"start_offset"`
	EndOffset   int64   `json:"end_offset"`
	Error       string  `json:"error,omitempty"`
}

func topicDescribe(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice topic describe", "NAME... [flags]", "Show each partition's leader, replicas, in-sync replicas, start and end offsets, and the topic's configs.")
	positional, err := fs.parse(args, io.out, 1, -1)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	var out []describedTopic
	for _, name := range positional {
		described, err := s.admin().DescribeTopics(rctx, name)
		if errors.Is(err, client.ErrUnknownTopic) {
			return topicNotFound(name)
		}
		if err != nil {
			return err
		}
		d := described[0]
		starts, err := s.admin().ListOffsets(rctx, name, client.AtStart())
		if err != nil {
			return err
		}
		ends, err := s.admin().ListOffsets(rctx, name, client.AtEnd())
		if err != nil {
			return err
		}
		topic := describedTopic{Name: d.Name, Internal: d.Internal, Configs: d.Configs}
		for _, p := range d.Partitions {
			row := describedPartition{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
				StartOffset: starts[p.Partition].Offset, EndOffset: ends[p.Partition].Offset}
			if p.Err != nil {
				row.Error = p.Err.Error()
			}
			topic.Partitions = append(topic.Partitions, row)
		}
		out = append(out, topic)
	}
	if fs.globals.json {
		return writeJSON(io.out, out)
	}
	for i, topic := range out {
		if i > 0 {
			fmt.Fprintln(io.out)
		}
		fmt.Fprintf(io.out, "topic %s: %d partitions\n", topic.Name, len(topic.Partitions))
		t := newTable(io.out, "partition", "leader", "replicas", "isr", "start", "end", "error")
		for _, p := range topic.Partitions {
			t.row(p.Partition, p.Leader, int32List(p.Replicas), int32List(p.ISR), p.StartOffset, p.EndOffset, p.Error)
		}
		t.flush()
		keys := make([]string, 0, len(topic.Configs))
		for k := range topic.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) > 0 {
			fmt.Fprintln(io.out)
			t := newTable(io.out, "config", "value")
			for _, k := range keys {
				t.row(k, topic.Configs[k])
			}
			t.flush()
		}
	}
	return nil
}

func topicDelete(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice topic delete", "NAME... [flags]", "Delete topics and all their records.")
	ifExists := fs.Bool("if-exists", false, "succeed if a topic does not exist")
	positional, err := fs.parse(args, io.out, 1, -1)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	for _, name := range positional {
		err := s.admin().DeleteTopics(rctx, name)
		if errors.Is(err, protocol.UnknownTopicOrPartition) {
			if *ifExists {
				continue
			}
			return topicNotFound(name)
		}
		if err != nil {
			return err
		}
		if !fs.globals.json {
			fmt.Fprintf(io.out, "deleted topic %s\n", name)
		}
	}
	if fs.globals.json {
		return writeJSON(io.out, map[string]any{"deleted": positional})
	}
	return nil
}

func topicAlter(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice topic alter", "NAME [flags]", `Change a topic's configs (other settings stay as they are) or grow its partitions.
Example: sluice topic alter orders --set retention.ms=3600000 --delete cleanup.policy --partitions 6`)
	var sets, deletes stringList
	fs.Var(&sets, "set", "set a config, `key=value` (repeatable)")
	fs.Var(&deletes, "delete", "revert a config to its default, `key` (repeatable)")
	partitions := fs.Int("partitions", 0, "grow the topic to this many partitions (partitions cannot shrink)")
	positional, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	settings, err := keyValues("set", sets)
	if err != nil {
		return usageErrorf(fs.name, "%v", err)
	}
	if len(settings) == 0 && len(deletes) == 0 && *partitions == 0 {
		return usageErrorf(fs.name, "nothing to change: give --set, --delete or --partitions")
	}
	if *partitions < 0 {
		return usageErrorf(fs.name, "--partitions must be positive")
	}
	name := positional[0]
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.admin().DescribeTopics(rctx, name); errors.Is(err, client.ErrUnknownTopic) {
		return topicNotFound(name)
	} else if err != nil {
		return err
	}
	var changes []client.ConfigChange
	for k, v := range settings {
		changes = append(changes, client.SetConfig(k, v))
	}
	for _, k := range deletes {
		changes = append(changes, client.DeleteConfig(k))
	}
	if len(changes) > 0 {
		if err := s.admin().AlterTopicConfigs(rctx, name, changes...); err != nil {
			return err
		}
	}
	if *partitions > 0 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		topic := kmsg.NewCreatePartitionsRequestTopic()
		topic.Topic, topic.Count = name, int32(*partitions)
		req.Topics, req.TimeoutMillis = append(req.Topics, topic), int32(fs.globals.timeout.Milliseconds())
		resp, err := req.RequestWith(rctx, s.raw)
		if err != nil {
			return fmt.Errorf("create partitions: %w", err)
		}
		for _, t := range resp.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				message := ""
				if t.ErrorMessage != nil {
					message = ": " + *t.ErrorMessage
				}
				return fmt.Errorf("grow %s to %d partitions: %w%s", name, *partitions, err, message)
			}
		}
	}
	if fs.globals.json {
		return writeJSON(io.out, map[string]any{"topic": name, "set": settings, "deleted": deletes, "partitions": *partitions})
	}
	fmt.Fprintf(io.out, "altered topic %s\n", name)
	return nil
}
