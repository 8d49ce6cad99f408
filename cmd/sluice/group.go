package main

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

const groupHelp = `Usage: sluice group <list|describe|reset-offsets|delete> [arguments] [flags]

Consumer groups.

  sluice group list
  sluice group describe GROUP          state, members, and per partition: committed offset, log end, lag
  sluice group reset-offsets GROUP --topic T (--to-earliest|--to-latest|--to-offset N|--to-time T|--shift-by N) [--execute]
  sluice group delete GROUP...

Run "sluice group <subcommand> --help" for its flags.
`

func runGroup(ctx context.Context, args []string, io streams) error {
	verb, rest, err := subcommand("group", args, []string{"list", "describe", "reset-offsets", "delete"}, io, groupHelp)
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		return groupList(ctx, rest, io)
	case "describe":
		return groupDescribe(ctx, rest, io)
	case "reset-offsets":
		return groupResetOffsets(ctx, rest, io)
	default:
		return groupDelete(ctx, rest, io)
	}
}

// groupOffsets reads and commits one group's offsets of one topic (all topics when topic is "")
// as a simple consumer: no member id, generation -1.
type groupOffsets struct {
	session *session
	group   string
	topic   string
}

// fetch returns the committed offsets (partitions without a commit are absent).
func (g *groupOffsets) fetch(ctx context.Context) (map[int32]int64, error) {
	all, err := fetchCommitted(ctx, g.session, g.group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for tp, offset := range all {
		if tp.Topic == g.topic {
			out[tp.Partition] = offset
		}
	}
	return out, nil
}

// fetchCommitted returns every committed offset of group.
func fetchCommitted(ctx context.Context, s *session, group string) (map[client.TopicPartition]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group // Topics nil: every committed offset of the group
	resp, err := req.RequestWith(ctx, s.raw)
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	out := map[client.TopicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("fetch offsets of group %s, %s-%d: %w", group, t.Topic, p.Partition, err)
			}
			if p.Offset >= 0 {
				out[client.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
			}
		}
	}
	return out, nil
}

// commit stores offsets for g's topic.
func (g *groupOffsets) commit(ctx context.Context, offsets map[int32]int64) error {
	tps := map[client.TopicPartition]int64{}
	for p, offset := range offsets {
		tps[client.TopicPartition{Topic: g.topic, Partition: p}] = offset
	}
	return commitOffsets(ctx, g.session, g.group, tps)
}

func commitOffsets(ctx context.Context, s *session, group string, offsets map[client.TopicPartition]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	byTopic := map[string]int{}
	for tp, offset := range offsets {
		index, ok := byTopic[tp.Topic]
		if !ok {
			index = len(req.Topics)
			byTopic[tp.Topic] = index
			topic := kmsg.NewOffsetCommitRequestTopic()
			topic.Topic = tp.Topic
			req.Topics = append(req.Topics, topic)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.Partition, offset, -1
		req.Topics[index].Partitions = append(req.Topics[index].Partitions, p)
	}
	resp, err := req.RequestWith(ctx, s.raw)
	if err != nil {
		return fmt.Errorf("commit offsets of group %s: %w", group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				hint := ""
				if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
					hint = " (the group has active members: stop them first)"
				}
				return fmt.Errorf("commit offsets of group %s, %s-%d: %w%s", group, t.Topic, p.Partition, err, hint)
			}
		}
	}
	return nil
}

func groupList(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice group list", "[flags]", "List consumer groups with their state.")
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(rctx, s.raw)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	type groupRow struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
	}
	rows := []groupRow{}
	for _, g := range resp.Groups {
		rows = append(rows, groupRow{g.Group, g.GroupState, g.ProtocolType})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Group < rows[j].Group })
	if fs.globals.json {
		return writeJSON(io.out, rows)
	}
	t := newTable(io.out, "group", "state", "protocol type")
	for _, r := range rows {
		t.row(r.Group, r.State, r.ProtocolType)
	}
	return t.flush()
}

// groupDescription is the JSON form of sluice group describe.
type groupDescription struct {
	Group        string            `json:"group"`
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol"`
	Members      []groupMember     `json:"members"`
	Offsets      []partitionOffset `json:"offsets"`
	TotalLag     int64             `json:"total_lag"`
}

type groupMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
}

type partitionOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: nothing committed
	LogEnd    int64  `json:"log_end"`
	Lag       int64  `json:"lag"`
}

func groupDescribe(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice group describe", "GROUP [flags]", "Show a group's state and members, and per partition its committed offset, the log end offset and the lag between them. For a share group: its members and, per partition, its start offset (everything below is acknowledged or archived) and lag (records not yet done).")
	positional, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	name := positional[0]
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	if handled, err := describeShareGroup(rctx, s, name, fs.globals.json, io); handled {
		return err
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{name}
	resp, err := req.RequestWith(rctx, s.raw)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", name, err)
	}
	description := groupDescription{Group: name, Members: []groupMember{}, Offsets: []partitionOffset{}}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			if errors.Is(err, kerr.GroupIDNotFound) {
				return groupNotFound(name)
			}
			return fmt.Errorf("describe group %s: %w", name, err)
		}
		description.State, description.ProtocolType, description.Protocol = g.State, g.ProtocolType, g.Protocol
		for _, m := range g.Members {
			member := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if m.InstanceID != nil {
				member.InstanceID = *m.InstanceID
			}
			description.Members = append(description.Members, member)
		}
	}
	if len(description.Members) == 0 {
		describeConsumerGroup(rctx, s, name, &description) // a KIP-848 group is no classic group
	}
	committed, err := fetchCommitted(rctx, s, name)
	if err != nil {
		return err
	}
	if (description.State == "Dead" || description.State == "") && len(committed) == 0 {
		return groupNotFound(name)
	}
	// Every partition of each topic the group committed on: a partition without a commit lags by
	// all it holds (what a member starting from the earliest offset would read).
	topics := map[string]bool{}
	for tp := range committed {
		topics[tp.Topic] = true
	}
	for topic := range topics {
		starts, err := s.admin().ListOffsets(rctx, topic, client.AtStart())
		if err != nil {
			return err
		}
		ends, err := s.admin().ListOffsets(rctx, topic, client.AtEnd())
		if err != nil {
			return err
		}
		for p, end := range ends {
			offset, has := committed[client.TopicPartition{Topic: topic, Partition: p}]
			lag := max(end.Offset-offset, 0)
			if !has {
				offset, lag = -1, max(end.Offset-starts[p].Offset, 0)
			}
			description.Offsets = append(description.Offsets, partitionOffset{topic, p, offset, end.Offset, lag})
			description.TotalLag += lag
		}
	}
	sort.Slice(description.Offsets, func(i, j int) bool {
		a, b := description.Offsets[i], description.Offsets[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	if fs.globals.json {
		return writeJSON(io.out, description)
	}
	fmt.Fprintf(io.out, "group %s: state %s, %d member(s), total lag %d\n", name, description.State, len(description.Members), description.TotalLag)
	if len(description.Members) > 0 {
		fmt.Fprintln(io.out)
		t := newTable(io.out, "member", "instance", "client", "host")
		for _, m := range description.Members {
			t.row(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost)
		}
		t.flush()
	}
	fmt.Fprintln(io.out)
	t := newTable(io.out, "topic", "partition", "committed", "log end", "lag")
	for _, o := range description.Offsets {
		committed := fmt.Sprint(o.Committed)
		if o.Committed < 0 {
			committed = "-"
		}
		t.row(o.Topic, o.Partition, committed, o.LogEnd, o.Lag)
	}
	return t.flush()
}

func groupResetOffsets(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice group reset-offsets", "GROUP --topic TOPIC (--to-earliest|--to-latest|--to-offset N|--to-time T|--shift-by N) [--execute]",
		`Move a group's committed offsets of a topic. Without --execute it only shows the plan. The group
must have no active members (stop its consumers first).`)
	topic := fs.String("topic", "", "the topic whose offsets to move (required)")
	toEarliest := fs.Bool("to-earliest", false, "to the start of each partition")
	toLatest := fs.Bool("to-latest", false, "to the end of each partition (skip everything not yet read)")
	toOffset := fs.Int64("to-offset", -1, "to this offset")
	toTime := fs.String("to-time", "", "to the first record at or after this time (RFC 3339, or a duration ago such as 1h)")
	shiftBy := fs.Int64("shift-by", 0, "move each committed offset by this much (negative: back)")
	execute := fs.Bool("execute", false, "apply the change (default: show it only)")
	positional, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	name := positional[0]
	if *topic == "" {
		return usageErrorf(fs.name, "--topic is required")
	}
	chosen := 0
	for _, set := range []bool{*toEarliest, *toLatest, *toOffset >= 0, *toTime != "", *shiftBy != 0} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return usageErrorf(fs.name, "give exactly one of --to-earliest, --to-latest, --to-offset, --to-time and --shift-by")
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	described, err := s.admin().DescribeTopics(rctx, *topic)
	if errors.Is(err, client.ErrUnknownTopic) {
		return topicNotFound(*topic)
	} else if err != nil {
		return err
	}
	var partitions []int32
	for _, p := range described[0].Partitions {
		partitions = append(partitions, p.Partition)
	}
	committed, err := (&groupOffsets{session: s, group: name, topic: *topic}).fetch(rctx)
	if err != nil {
		return err
	}
	starts, err := s.admin().ListOffsets(rctx, *topic, client.AtStart(), partitions...)
	if err != nil {
		return err
	}
	ends, err := s.admin().ListOffsets(rctx, *topic, client.AtEnd(), partitions...)
	if err != nil {
		return err
	}
	var target map[int32]client.ListedOffset
	if *toTime != "" {
		at, err := parseTime(*toTime)
		if err != nil {
			return usageErrorf(fs.name, "--to-time %q: want an RFC 3339 time or a duration ago", *toTime)
		}
		if target, err = s.admin().ListOffsets(rctx, *topic, client.AtTime(at), partitions...); err != nil {
			return err
		}
	}
	plan := map[int32]int64{}
	var rows []partitionOffset
	for _, p := range partitions {
		current, has := committed[p]
		var next int64
		switch {
		case *toEarliest:
			next = starts[p].Offset
		case *toLatest:
			next = ends[p].Offset
		case *toOffset >= 0:
			next = *toOffset
		case *toTime != "":
			next = target[p].Offset
			if next < 0 {
				next = ends[p].Offset
			}
		default:
			if !has {
				continue // nothing committed to shift
			}
			next = current + *shiftBy
		}
		next = min(max(next, starts[p].Offset), ends[p].Offset)
		plan[p] = next
		if !has {
			current = -1
		}
		rows = append(rows, partitionOffset{Topic: *topic, Partition: p, Committed: current, LogEnd: ends[p].Offset, Lag: ends[p].Offset - next})
	}
	if *execute {
		if err := (&groupOffsets{session: s, group: name, topic: *topic}).commit(rctx, plan); err != nil {
			return err
		}
	}
	type planRow struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Current   int64  `json:"current"`
		New       int64  `json:"new"`
		Lag       int64  `json:"lag"`
	}
	out := []planRow{}
	for _, r := range rows {
		out = append(out, planRow{r.Topic, r.Partition, r.Committed, plan[r.Partition], r.Lag})
	}
	if fs.globals.json {
		return writeJSON(io.out, map[string]any{"group": name, "executed": *execute, "offsets": out})
	}
	t := newTable(io.out, "topic", "partition", "current", "new", "lag after")
	for _, r := range out {
		current := fmt.Sprint(r.Current)
		if r.Current < 0 {
			current = "-"
		}
		t.row(r.Topic, r.Partition, current, r.New, r.Lag)
	}
	t.flush()
	if *execute {
		fmt.Fprintf(io.out, "offsets of group %s reset\n", name)
	} else {
		fmt.Fprintln(io.out, "dry run: add --execute to apply")
	}
	return nil
}

func groupDelete(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice group delete", "GROUP... [flags]", "Delete consumer groups and their committed offsets. A group with active members cannot be deleted.")
	positional, err := fs.parse(args, io.out, 1, -1)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = positional
	resp, err := req.RequestWith(rctx, s.raw)
	if err != nil {
		return fmt.Errorf("delete groups: %w", err)
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			switch {
			case errors.Is(err, kerr.GroupIDNotFound):
				return groupNotFound(g.Group)
			case errors.Is(err, kerr.NonEmptyGroup):
				return fmt.Errorf("group %s has active members: stop its consumers first", g.Group)
			}
			return fmt.Errorf("delete group %s: %w", g.Group, err)
		}
	}
	if fs.globals.json {
		return writeJSON(io.out, map[string]any{"deleted": positional})
	}
	for _, g := range positional {
		fmt.Fprintf(io.out, "deleted group %s\n", g)
	}
	return nil
}
