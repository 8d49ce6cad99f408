package console

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/client"
)

// describeShareGroup returns a share group (KIP-932) as the group page shows it: members with
// their assignments, and per share partition its start offset (everything below is acknowledged
// or archived) in the Committed column and the broker's lag (records below the high watermark
// not yet done). errGroupNotFound when no share group has that name.
func (c *Console) describeShareGroup(ctx context.Context, k *kafkaClients, name string) (*groupState, error) {
	description, err := client.NewAdmin(k.client).DescribeShareGroup(ctx, name)
	var kafkaErr *client.KafkaError
	if errors.As(err, &kafkaErr) && kafkaErr.Code == kerr.GroupIDNotFound.Code {
		return nil, fmt.Errorf("console: group %s: %w", name, errGroupNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("console: describe share group %s: %w", name, err)
	}
	group := &groupState{Name: name, State: description.State, ProtocolType: "share", Share: true}
	for _, m := range description.Members {
		member := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
		byTopic := map[string][]int32{}
		for _, tp := range m.Assigned {
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		for topic, partitions := range byTopic {
			member.Assigned = append(member.Assigned, topicPartitions{topic, sorted(partitions)})
		}
		sort.Slice(member.Assigned, func(i, j int) bool { return member.Assigned[i].Topic < member.Assigned[j].Topic })
		group.Members = append(group.Members, member)
	}
	var topics []string
	for _, p := range description.Partitions {
		topics = append(topics, p.Topic)
	}
	ends := map[topicPartition]int64{}
	if len(topics) > 0 {
		if cluster, err := cluster(ctx, k, dedupe(topics)...); err == nil {
			for _, t := range cluster.Topics {
				for _, p := range t.Partitions {
					ends[topicPartition{t.Name, p.Partition}] = p.LogEnd
				}
			}
		}
	}
	for _, p := range description.Partitions {
		end, ok := ends[topicPartition{p.Topic, p.Partition}]
		if !ok {
			end = -1
		}
		group.Offsets = append(group.Offsets, partitionLag{Topic: p.Topic, Partition: p.Partition, Committed: p.StartOffset, LogEnd: end, Lag: max(p.Lag, 0)})
		group.TotalLag += max(p.Lag, 0)
	}
	return group, nil
}

// sampleShareGroups adds each share group's lag per partition to s.
func sampleShareGroups(ctx context.Context, c *client.Client, groups []string, s *sample) {
	admin := client.NewAdmin(c)
	for _, name := range groups {
		description, err := admin.DescribeShareGroup(ctx, name)
		if err != nil {
			continue // gone since the list
		}
		lags := make(map[topicPartition]int64, len(description.Partitions))
		for _, p := range description.Partitions {
			lags[topicPartition{p.Topic, p.Partition}] = max(p.Lag, 0)
		}
		s.GroupLags[name] = lags
	}
}
