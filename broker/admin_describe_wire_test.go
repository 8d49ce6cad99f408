package broker

// DescribeProducers, DescribeLogDirs, DescribeClientQuotas and AlterClientQuotas over a real socket.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func TestDescribeProducers(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("produced", 2, nil)
	first := c.initProducerID(4, nil, -1, -1)
	second := c.initProducerID(4, nil, -1, -1)
	for _, p := range []struct {
		id       int64
		epoch    int16
		sequence int32
		values   []string
	}{
		{first.ProducerID, first.ProducerEpoch, 0, []string{"a", "b"}},
		{first.ProducerID, first.ProducerEpoch, 2, []string{"c", "d", "e"}},
		{second.ProducerID, second.ProducerEpoch, 0, []string{"x"}},
	} {
		if result := c.produceWith(produceRequest(9, -1, "produced", 0, idempotentBatch(p.id, p.epoch, p.sequence, p.values...))); result.ErrorCode != 0 {
			t.Fatalf("produce: error %d", result.ErrorCode)
		}
	}
	c.mustProduce("produced", 1, recordBatch(batchTime, "not idempotent"))

	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "produced", []int32{0, 1, 7}
	unknown := kmsg.NewDescribeProducersRequestTopic()
	unknown.Topic, unknown.Partitions = "nowhere", []int32{0}
	req.Topics = append(req.Topics, rt, unknown)
	resp := roundTrip[*kmsg.DescribeProducersResponse](c, req)
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("response: %+v", resp.Topics)
	}
	p0, p1, p7 := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1], resp.Topics[0].Partitions[2]
	if p0.ErrorCode != 0 || len(p0.ActiveProducers) != 2 {
		t.Fatalf("partition 0: %+v", p0)
	}
	want := map[int64]int32{first.ProducerID: 4, second.ProducerID: 0}
	for _, active := range p0.ActiveProducers {
		if last, ok := want[active.ProducerID]; !ok || active.LastSequence != last || active.ProducerEpoch != 0 || active.CurrentTxnStartOffset != -1 {
			t.Errorf("active producer %+v, want last sequence %d", active, last)
		}
	}
	if p0.ActiveProducers[0].ProducerID > p0.ActiveProducers[1].ProducerID {
		t.Errorf("producers not ordered by id: %+v", p0.ActiveProducers)
	}
	if p1.ErrorCode != 0 || len(p1.ActiveProducers) != 0 {
		t.Errorf("partition 1 (no idempotent producer): %+v", p1)
	}
	wantCode(t, "partition 7", p7.ErrorCode, protocol.UnknownTopicOrPartition)
	wantCode(t, "unknown topic", resp.Topics[1].Partitions[0].ErrorCode, protocol.UnknownTopicOrPartition)
}

func TestDescribeLogDirs(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("sized", 2, nil)
	c.createTopic("other", 1, nil)
	c.mustProduce("sized", 1, recordBatch(batchTime, "some bytes"))

	describe := func(version int16, topics []kmsg.DescribeLogDirsRequestTopic) kmsg.DescribeLogDirsResponseDir {
		t.Helper()
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.SetVersion(version)
		req.Topics = topics
		resp := roundTrip[*kmsg.DescribeLogDirsResponse](c, req)
		if resp.ErrorCode != 0 || len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v", version, resp)
		}
		return resp.Dirs[0]
	}
	for version := int16(0); version <= 4; version++ {
		dir := describe(version, nil)
		if !filepath.IsAbs(dir.Dir) {
			t.Errorf("v%d: dir %q is not absolute", version, dir.Dir)
		}
		if _, err := os.Stat(filepath.Join(dir.Dir, "sized-1")); err != nil {
			t.Errorf("v%d: dir %q does not hold the partition logs: %v", version, dir.Dir, err)
		}
		sizes := map[string]int64{}
		for _, topic := range dir.Topics {
			for _, p := range topic.Partitions {
				sizes[topic.Topic+"-"+string(rune('0'+p.Partition))] = p.Size
			}
		}
		p, _ := b.registry.partition("sized", 1)
		if len(sizes) != 3 || sizes["sized-1"] != p.log.Size() || sizes["sized-1"] == 0 || sizes["sized-0"] != 0 {
			t.Errorf("v%d: sizes %v, want three partitions, sized-1 of %d bytes", version, sizes, p.log.Size())
		}
		if version >= 4 && (dir.TotalBytes <= 0 || dir.UsableBytes < 0 || dir.UsableBytes > dir.TotalBytes) {
			t.Errorf("v%d: total %d usable %d", version, dir.TotalBytes, dir.UsableBytes)
		}
	}
	rt := kmsg.NewDescribeLogDirsRequestTopic()
	rt.Topic, rt.Partitions = "sized", []int32{1, 9}
	dir := describe(4, []kmsg.DescribeLogDirsRequestTopic{rt})
	if len(dir.Topics) != 1 || dir.Topics[0].Topic != "sized" || len(dir.Topics[0].Partitions) != 1 || dir.Topics[0].Partitions[0].Partition != 1 {
		t.Errorf("filtered: %+v", dir.Topics)
	}
}

func TestClientQuotas(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	describe := func(version int16, components ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.SetVersion(version)
		req.Components = components
		return roundTrip[*kmsg.DescribeClientQuotasResponse](c, req)
	}
	component := func(entityType string, matchType kmsg.QuotasMatchType, match *string) kmsg.DescribeClientQuotasRequestComponent {
		return kmsg.DescribeClientQuotasRequestComponent{EntityType: entityType, MatchType: matchType, Match: match}
	}
	for version := int16(0); version <= 1; version++ {
		for _, filter := range [][]kmsg.DescribeClientQuotasRequestComponent{
			nil,
			{component("user", 2, nil)},
			{component("user", 0, kmsg.StringPtr("alice")), component("client-id", 1, nil)},
			{component("ip", 0, kmsg.StringPtr("10.0.0.1"))},
		} {
			resp := describe(version, filter...)
			if resp.ErrorCode != 0 || resp.Entries == nil || len(resp.Entries) != 0 {
				t.Errorf("v%d describe %+v: error %d, entries %v; want none", version, filter, resp.ErrorCode, resp.Entries)
			}
		}
		for _, filter := range [][]kmsg.DescribeClientQuotasRequestComponent{
			{component("group", 2, nil)},
			{component("user", 0, nil)},
			{component("user", 1, kmsg.StringPtr("alice"))},
			{component("user", 5, nil)},
			{component("user", 2, nil), component("user", 1, nil)},
			{component("ip", 2, nil), component("user", 2, nil)},
		} {
			resp := describe(version, filter...)
			if resp.ErrorCode != protocol.InvalidRequest.Code || resp.ErrorMessage == nil {
				t.Errorf("v%d describe %+v: error %d, message %v; want INVALID_REQUEST with a message", version, filter, resp.ErrorCode, deref(resp.ErrorMessage))
			}
		}
	}

	entry := func(key string, remove bool, entities ...string) kmsg.AlterClientQuotasRequestEntry {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		for i := 0; i+1 < len(entities); i += 2 {
			e.Entity = append(e.Entity, kmsg.AlterClientQuotasRequestEntryEntity{Type: entities[i], Name: kmsg.StringPtr(entities[i+1])})
		}
		e.Ops = append(e.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: key, Value: 1024, Remove: remove})
		return e
	}
	for version := int16(0); version <= 1; version++ {
		for _, validateOnly := range []bool{false, true} {
			req := kmsg.NewPtrAlterClientQuotasRequest()
			req.SetVersion(version)
			req.ValidateOnly = validateOnly
			req.Entries = []kmsg.AlterClientQuotasRequestEntry{
				entry("producer_byte_rate", false, "client-id", "loud"),
				entry("producer_byte_rate", true, "client-id", "loud"),
				entry("bogus_rate", true, "user", "alice"),
				entry("producer_byte_rate", false, "team", "x"),
			}
			resp := roundTrip[*kmsg.AlterClientQuotasResponse](c, req)
			if len(resp.Entries) != 4 {
				t.Fatalf("v%d: %d entries", version, len(resp.Entries))
			}
			wantCodes := []protocol.ErrorCode{protocol.InvalidRequest, protocol.None, protocol.InvalidRequest, protocol.InvalidRequest}
			for i, want := range wantCodes {
				got := resp.Entries[i]
				if got.ErrorCode != want.Code || (want.Code != 0) != (got.ErrorMessage != nil) || len(got.Entity) != 1 {
					t.Errorf("v%d entry %d: %+v, want %s", version, i, got, want.Name)
				}
			}
		}
	}
	if resp := describe(1); len(resp.Entries) != 0 {
		t.Errorf("after the refused alterations: %v", resp.Entries)
	}
}
