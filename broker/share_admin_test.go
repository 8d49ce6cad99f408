package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// TestShareGroupAdministration: ShareGroupDescribe, ListGroups v5 with types, the share-group
// offset APIs, group configs in DescribeConfigs, and a classic join on a share group's id.
func TestShareGroupAdministration(t *testing.T) {
	b := startBroker(t, nil)
	admin := franzClient(t, b)
	ctx := groupTestContext(t)
	franzCreateTopic(t, admin, "jobs", 2)
	setGroupConfigs(t, admin, "workers", map[string]string{"share.auto.offset.reset": "earliest"})
	produceNumbered(t, b, "jobs", 100)
	accepted := acceptLedger{newLedger()}
	worker := startShareWorker(t, b, "workers", "jobs", accepted.accept)
	accepted.awaitUnique(ctx, t, 100)
	awaitShareDone(t, b, "workers", "jobs", 2, 100)

	describe := kmsg.NewPtrShareGroupDescribeRequest()
	describe.GroupIDs = []string{"workers", "nobody"}
	described, err := describe.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if g := described.Groups[0]; g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) != 1 ||
		len(g.Members[0].Assignment.TopicPartitions) != 1 || len(g.Members[0].Assignment.TopicPartitions[0].Partitions) != 2 {
		t.Errorf("ShareGroupDescribe workers: %+v", g)
	}
	if g := described.Groups[1]; g.ErrorCode != protocol.GroupIDNotFound.Code {
		t.Errorf("ShareGroupDescribe of an unknown group: error %d, want GROUP_ID_NOT_FOUND", g.ErrorCode)
	}

	listed := func(types ...string) map[string]string {
		req := kmsg.NewPtrListGroupsRequest()
		req.TypesFilter = types
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ListGroups: %v %+v", err, resp)
		}
		out := map[string]string{}
		for _, g := range resp.Groups {
			out[g.Group] = g.GroupType + "/" + g.GroupState
		}
		return out
	}
	if got := listed("share"); got["workers"] != "share/Stable" {
		t.Errorf("ListGroups types=share: %v", got)
	}
	if got := listed("classic"); got["workers"] != "" {
		t.Errorf("ListGroups types=classic lists the share group: %v", got)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "workers", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if resp, err := join.RequestWith(ctx, admin); err != nil || resp.ErrorCode != protocol.InconsistentGroupProtocol.Code {
		t.Errorf("classic JoinGroup on a share group: %v error %d, want INCONSISTENT_GROUP_PROTOCOL", err, resp.ErrorCode)
	}

	offsets := func() map[int32][2]int64 {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = "workers"
		g.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "jobs", Partitions: []int32{0, 1}}}
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, resp)
		}
		out := map[int32][2]int64{}
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			out[p.Partition] = [2]int64{p.StartOffset, p.Lag}
		}
		return out
	}
	if got := offsets(); got[0] != [2]int64{50, 0} || got[1] != [2]int64{50, 0} {
		t.Errorf("share offsets after everything was accepted: %v, want start 50 and lag 0 each", got)
	}

	alter := func() int16 {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = "workers"
		req.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "jobs", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 40}}}}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := alter(); code != protocol.NonEmptyGroup.Code {
		t.Errorf("AlterShareGroupOffsets with a member: error %d, want NON_EMPTY_GROUP", code)
	}
	worker.stop()
	if code := alter(); code != 0 {
		t.Fatalf("AlterShareGroupOffsets of an empty group: error %d", code)
	}
	if got := offsets(); got[0] != [2]int64{40, 10} {
		t.Errorf("partition 0 after the alter: %v, want start 40 lag 10", got[0])
	}
	again := acceptLedger{newLedger()}
	worker = startShareWorker(t, b, "workers", "jobs", again.accept)
	again.awaitUnique(ctx, t, 10)
	worker.stop()
	again.check(t, "after the alter", 10, true)

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "workers"
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "jobs"}}
	if resp, err := del.RequestWith(ctx, admin); err != nil || resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteShareGroupOffsets: %v %+v", err, resp)
	}
	if got := offsets(); got[0][0] != -1 || got[1][0] != -1 {
		t.Errorf("share offsets after the delete: %v, want start -1", got)
	}

	configs := kmsg.NewPtrDescribeConfigsRequest()
	configs.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: resourceGroup, ResourceName: "workers"}}
	resp, err := configs.RequestWith(ctx, admin)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs GROUP: %v %+v", err, resp)
	}
	found := false
	for _, c := range resp.Resources[0].Configs {
		if c.Name == "share.auto.offset.reset" {
			found = *c.Value == "earliest" && c.Source == sourceDynamicGroupConfig
		}
	}
	if !found {
		t.Errorf("DescribeConfigs GROUP does not report share.auto.offset.reset=earliest as a group override: %+v", resp.Resources[0].Configs)
	}
}
