package client

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterGroupConfigs applies changes to a group's configs (IncrementalAlterConfigs on resource type
// GROUP): share.auto.offset.reset, share.record.lock.duration.ms, share.delivery.count.limit, the
// session and heartbeat settings.
func (a *Admin) AlterGroupConfigs(ctx context.Context, group string, changes ...ConfigChange) error {
	conn, err := a.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	resource := kmsg.NewIncrementalAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, change := range changes {
		config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		config.Name, config.Value = change.Name, change.Value
		config.Op = kmsg.IncrementalAlterConfigOpSet
		if change.Value == nil {
			config.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		resource.Configs = append(resource.Configs, config)
	}
	req.Resources = append(req.Resources, resource)
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range raw.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		errs = append(errs, errorForCode("alter group configs", r.ResourceName, -1, r.ErrorCode, r.ErrorMessage))
	}
	return errors.Join(errs...)
}

// ShareGroupDescription is a share group's membership and progress.
type ShareGroupDescription struct {
	Group   string
	State   string
	Epoch   int32
	Members []ShareGroupMember
	// Partitions are the share partitions the group has state for, by topic and partition.
	Partitions []SharePartitionProgress
}

// ShareGroupMember is one member of a share group.
type ShareGroupMember struct {
	MemberID, ClientID, ClientHost string
	Epoch                          int32
	Assigned                       []TopicPartition
}

// SharePartitionProgress is a share partition's start offset (every record below it is
// acknowledged or archived) and lag (records below the high watermark not yet done; -1 unknown).
type SharePartitionProgress struct {
	TopicPartition
	StartOffset int64
	Lag         int64
}

// DescribeShareGroup asks the group's coordinator for its members (ShareGroupDescribe) and share
// partitions (DescribeShareGroupOffsets). A group id that is no share group gives an error wrapping
// GROUP_ID_NOT_FOUND.
func (a *Admin) DescribeShareGroup(ctx context.Context, group string) (ShareGroupDescription, error) {
	coord := newGroupCoordinator(a.client, group)
	defer coord.close()
	out := ShareGroupDescription{Group: group}
	describe := kmsg.NewPtrShareGroupDescribeRequest()
	describe.GroupIDs = []string{group}
	raw, err := coord.roundTrip(ctx, false, describe)
	if err != nil {
		return out, err
	}
	resp := raw.(*kmsg.ShareGroupDescribeResponse)
	if len(resp.Groups) != 1 {
		return out, errors.New("client: ShareGroupDescribe answered no group")
	}
	g := resp.Groups[0]
	if err := errorForCode("describe share group", "", -1, g.ErrorCode, g.ErrorMessage); err != nil {
		return out, err
	}
	out.State, out.Epoch = g.GroupState, g.GroupEpoch
	for _, m := range g.Members {
		member := ShareGroupMember{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Epoch: m.MemberEpoch}
		for _, t := range m.Assignment.TopicPartitions {
			for _, p := range t.Partitions {
				member.Assigned = append(member.Assigned, TopicPartition{t.Topic, p})
			}
		}
		out.Members = append(out.Members, member)
	}
	offsets := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group // no topics: every partition the group has state for
	offsets.Groups = append(offsets.Groups, rg)
	raw, err = coord.roundTrip(ctx, false, offsets)
	if err != nil {
		return out, err
	}
	for _, rg := range raw.(*kmsg.DescribeShareGroupOffsetsResponse).Groups {
		if err := errorForCode("describe share group offsets", "", -1, rg.ErrorCode, rg.ErrorMessage); err != nil {
			return out, err
		}
		for _, t := range rg.Topics {
			for _, p := range t.Partitions {
				out.Partitions = append(out.Partitions, SharePartitionProgress{TopicPartition{t.Topic, p.Partition}, p.StartOffset, p.Lag})
			}
		}
	}
	slices.SortFunc(out.Partitions, func(a, b SharePartitionProgress) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return out, nil
}
