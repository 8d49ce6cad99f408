package console

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupSummary is one row of the groups page.
type groupSummary struct {
	Name         string
	State        string
	ProtocolType string
	Type         string // "classic", "consumer" (KIP-848), "share"
	Members      int
	TotalLag     int64
	HasOffsets   bool
}

// groupState is one group: members with assignments, and per partition its committed offset,
// log end and lag.
type groupState struct {
	Name         string
	State        string
	ProtocolType string
	Protocol     string
	Members      []groupMember
	Offsets      []partitionLag // by topic, partition
	TotalLag     int64
	// Share is set for a share group: Committed holds each share partition's start offset.
	Share bool
}

type groupMember struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Assigned                                   []topicPartitions
}

type topicPartitions struct {
	Topic      string
	Partitions []int32
}

type partitionLag struct {
	Topic     string
	Partition int32
	Committed int64 // -1: nothing committed
	LogEnd    int64
	// Lag is LogEnd - Committed, or, with no commit, what the partition holds (LogEnd - LogStart):
	// what a member starting from the earliest offset would read.
	Lag int64
}

// listGroups asks every broker for its groups (kgo merges the answers).
func listGroups(ctx context.Context, raw *kgo.Client) ([]groupSummary, error) {
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("console: list groups: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("console: list groups: %w", err)
	}
	var groups []groupSummary
	for _, g := range resp.Groups {
		summary := groupSummary{Name: g.Group, State: g.GroupState, ProtocolType: g.ProtocolType, Type: g.GroupType}
		if summary.Type == "" {
			summary.Type = "classic"
		}
		groups = append(groups, summary)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	return groups, nil
}

// committedOffsets returns every offset group has committed.
func committedOffsets(ctx context.Context, raw *kgo.Client, group string) (map[topicPartition]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group // Topics nil: every committed offset
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("console: offsets of group %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("console: offsets of group %s: %w", group, err)
	}
	out := map[topicPartition]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[topicPartition{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return out, nil
}

// committedOffsetsOfGroups returns every offset each named group has committed, in one
// OffsetFetch v8 request (kgo sends each group's part to its coordinator, or one request per
// group to a broker without v8). A group whose part fails is left out.
func committedOffsetsOfGroups(ctx context.Context, raw *kgo.Client, groups []string) (map[string]map[topicPartition]int64, error) {
	out := map[string]map[topicPartition]int64{}
	if len(groups) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	for _, name := range groups {
		group := kmsg.NewOffsetFetchRequestGroup()
		group.Group = name // Topics nil: every committed offset
		req.Groups = append(req.Groups, group)
	}
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("console: offsets of %d groups: %w", len(groups), err)
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			continue
		}
		offsets := map[topicPartition]int64{}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Offset >= 0 {
					offsets[topicPartition{t.Topic, p.Partition}] = p.Offset
				}
			}
		}
		out[g.Group] = offsets
	}
	return out, nil
}

// lags turns committed offsets into per-partition lag over every partition of each topic the
// group committed on; cluster must hold those topics' offsets (fillOffsets).
func lags(cluster *clusterState, committed map[topicPartition]int64) ([]partitionLag, int64) {
	topics := map[string]bool{}
	for tp := range committed {
		topics[tp.Topic] = true
	}
	var out []partitionLag
	var total int64
	for _, t := range cluster.Topics {
		if !topics[t.Name] {
			continue
		}
		for _, p := range t.Partitions {
			row := partitionLag{Topic: t.Name, Partition: p.Partition, Committed: -1, LogEnd: p.LogEnd}
			if offset, ok := committed[topicPartition{t.Name, p.Partition}]; ok {
				row.Committed, row.Lag = offset, max(p.LogEnd-offset, 0)
			} else {
				row.Lag = max(p.LogEnd-max(p.LogStart, 0), 0)
			}
			if p.LogEnd < 0 {
				row.Lag = 0
			}
			total += row.Lag
			out = append(out, row)
		}
	}
	return out, total
}

// describeGroup returns a group's members (DescribeGroups; for a KIP-848 group,
// ConsumerGroupDescribe) and its lag per partition. errGroupNotFound when the group has neither
// members nor offsets.
func describeGroup(ctx context.Context, raw *kgo.Client, name string) (*groupState, *clusterState, error) {
	group := &groupState{Name: name}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{name}
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return nil, nil, fmt.Errorf("console: describe group %s: %w", name, err)
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, nil, fmt.Errorf("console: describe group %s: %w", name, err)
		}
		group.State, group.ProtocolType, group.Protocol = g.State, g.ProtocolType, g.Protocol
		for _, m := range g.Members {
			member := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if m.InstanceID != nil {
				member.InstanceID = *m.InstanceID
			}
			if g.ProtocolType == "consumer" {
				var assignment kmsg.ConsumerMemberAssignment
				if assignment.ReadFrom(m.MemberAssignment) == nil {
					for _, t := range assignment.Topics {
						member.Assigned = append(member.Assigned, topicPartitions{t.Topic, sorted(t.Partitions)})
					}
				}
			}
			group.Members = append(group.Members, member)
		}
	}
	if len(group.Members) == 0 {
		describeConsumerGroup(ctx, raw, group)
	}
	committed, err := committedOffsets(ctx, raw, name)
	if err != nil {
		return nil, nil, err
	}
	if (group.State == "" || group.State == "Dead") && len(committed) == 0 && len(group.Members) == 0 {
		return nil, nil, fmt.Errorf("console: group %s: %w", name, errGroupNotFound)
	}
	var topics []string
	for tp := range committed {
		topics = append(topics, tp.Topic)
	}
	cluster := &clusterState{}
	if len(topics) > 0 {
		if cluster, err = metadata(ctx, raw, dedupe(topics)...); err != nil {
			return nil, nil, err
		}
		if err := fillOffsets(ctx, raw, cluster); err != nil {
			return nil, nil, err
		}
	}
	group.Offsets, group.TotalLag = lags(cluster, committed)
	return group, cluster, nil
}

var errGroupNotFound = errors.New("no such group")

// describeConsumerGroup fills members of a KIP-848 group, which DescribeGroups does not list.
// A broker that does not serve ConsumerGroupDescribe leaves the group as it was.
func describeConsumerGroup(ctx context.Context, raw *kgo.Client, group *groupState) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group.Name}
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			continue
		}
		group.State, group.ProtocolType, group.Protocol = g.State, "consumer", g.AssignorName
		for _, m := range g.Members {
			member := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if m.InstanceID != nil {
				member.InstanceID = *m.InstanceID
			}
			for _, t := range m.Assignment.TopicPartitions {
				member.Assigned = append(member.Assigned, topicPartitions{t.Topic, sorted(t.Partitions)})
			}
			group.Members = append(group.Members, member)
		}
	}
}

func sorted(partitions []int32) []int32 {
	out := append([]int32(nil), partitions...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func dedupe(names []string) []string {
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}
