package main

// Share groups on the command line: "sluice consume TOPIC --share-group G" is one member of share
// group G (records, not partitions, are shared: any number of such consumers split a topic), and
// "sluice group describe G" shows a share group's members and, per partition, its start offset and
// the records not yet acknowledged.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/protocol"
)

// shareConsume reads topic as a member of share group, writing each record and then accepting it.
// With fromBeginning the group's share.auto.offset.reset becomes earliest first (it applies to
// partitions the group has no state for yet).
func shareConsume(ctx context.Context, g globals, io streams, topic, group, format, separator string, count int64, exitAtEnd, fromBeginning bool) error {
	s, rctx, release, err := open(ctx, g)
	if err != nil {
		return err
	}
	defer release()
	if _, err := s.admin().DescribeTopics(rctx, topic); errors.Is(err, client.ErrUnknownTopic) {
		return topicNotFound(topic)
	} else if err != nil {
		return err
	}
	if fromBeginning {
		if err := s.admin().AlterGroupConfigs(rctx, group, client.SetConfig("share.auto.offset.reset", "earliest")); err != nil {
			return fmt.Errorf("set share.auto.offset.reset of %s: %w", group, err)
		}
	}
	consumer, err := client.NewShareConsumer(s.client, group, []string{topic})
	if err != nil {
		return err
	}
	closed := false
	closeConsumer := func() error {
		if closed {
			return nil
		}
		closed = true
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		defer cancel()
		if err := consumer.Close(ctx); err != nil {
			return fmt.Errorf("leaving the share group: %w", err)
		}
		return nil
	}
	defer closeConsumer()
	out := bufio.NewWriterSize(io.out, 64<<10)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	var written int64
	polledOnce := false
	for count == 0 || written < count {
		pollCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		records, err := consumer.Poll(pollCtx)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, context.DeadlineExceeded) {
			if exitAtEnd && polledOnce {
				break // nothing left to acquire
			}
			continue
		}
		if err != nil {
			return err
		}
		polledOnce = true
		for _, r := range records {
			if count > 0 && written >= count {
				r.Release() // not written out: someone else's
				continue
			}
			if err := writeRecord(out, encoder, format, separator, &r.Record); err != nil {
				return err
			}
			r.Accept()
			written++
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return closeConsumer()
}

// describeConsumerGroup fills a description from ConsumerGroupDescribe when name is a KIP-848
// consumer group; it reports false otherwise.
func describeConsumerGroup(ctx context.Context, s *session, name string, description *groupDescription) bool {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{name}
	resp, err := req.RequestWith(ctx, s.raw)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return false
	}
	g := resp.Groups[0]
	description.State, description.ProtocolType, description.Protocol = g.State, "consumer (KIP-848)", g.AssignorName
	description.Members = description.Members[:0]
	for _, m := range g.Members {
		member := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		if m.InstanceID != nil {
			member.InstanceID = *m.InstanceID
		}
		description.Members = append(description.Members, member)
	}
	return true
}

// shareGroupOutput is "sluice group describe" of a share group.
type shareGroupOutput struct {
	Group      string                 `json:"group"`
	Type       string                 `json:"type"`
	State      string                 `json:"state"`
	Epoch      int32                  `json:"epoch"`
	Members    []shareMemberOutput    `json:"members"`
	Partitions []sharePartitionOutput `json:"partitions"`
	TotalLag   int64                  `json:"total_lag"`
}

type shareMemberOutput struct {
	MemberID   string `json:"member_id"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	Epoch      int32  `json:"epoch"`
	Partitions int    `json:"partitions"`
}

type sharePartitionOutput struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
	Lag         int64  `json:"lag"`
}

// describeShareGroup prints a share group; handled is false when name is no share group.
func describeShareGroup(ctx context.Context, s *session, name string, jsonOutput bool, io streams) (handled bool, err error) {
	d, err := s.admin().DescribeShareGroup(ctx, name)
	if errors.Is(err, protocol.GroupIDNotFound) || errors.Is(err, protocol.UnsupportedVersion) || errors.Is(err, client.ErrUnsupported) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("describe share group %s: %w", name, err)
	}
	out := shareGroupOutput{Group: name, Type: "share", State: d.State, Epoch: d.Epoch, Members: []shareMemberOutput{}, Partitions: []sharePartitionOutput{}}
	for _, m := range d.Members {
		out.Members = append(out.Members, shareMemberOutput{m.MemberID, m.ClientID, m.ClientHost, m.Epoch, len(m.Assigned)})
	}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, sharePartitionOutput{p.Topic, p.Partition, p.StartOffset, p.Lag})
		out.TotalLag += max(p.Lag, 0)
	}
	if jsonOutput {
		return true, writeJSON(io.out, out)
	}
	fmt.Fprintf(io.out, "share group %s: state %s, epoch %d, %d member(s), in flight or waiting (lag) %d\n", name, out.State, out.Epoch, len(out.Members), out.TotalLag)
	if len(out.Members) > 0 {
		fmt.Fprintln(io.out)
		t := newTable(io.out, "member", "client", "host", "epoch", "partitions")
		for _, m := range out.Members {
			t.row(m.MemberID, m.ClientID, m.ClientHost, m.Epoch, m.Partitions)
		}
		t.flush()
	}
	fmt.Fprintln(io.out)
	t := newTable(io.out, "topic", "partition", "start offset", "lag")
	for _, p := range out.Partitions {
		lag := fmt.Sprint(p.Lag)
		if p.Lag < 0 {
			lag = "-"
		}
		t.row(p.Topic, p.Partition, p.StartOffset, lag)
	}
	return true, t.flush()
}
