package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareFetchAt sends one ShareFetch for partition 0 of topic with the given session epoch and
// returns the partition's acquired ranges.
func shareFetchAt(t *testing.T, client *kgo.Client, topicID [16]byte, member string, epoch int32) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr("workers"), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = epoch, 0, 1, 1<<20, 100
	topic := kmsg.NewShareFetchRequestTopic()
	topic.TopicID = topicID
	p := kmsg.NewShareFetchRequestTopicPartition()
	p.PartitionMaxBytes = 1 << 20
	topic.Partitions = append(topic.Partitions, p)
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(groupTestContext(t), client)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch epoch %d: error %d", epoch, resp.ErrorCode)
	}
	var acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			acquired = append(acquired, p.AcquiredRecords...)
		}
	}
	return acquired
}

// startShareMember starts a broker with topic "jobs" (one partition, records 0-9) and a member of
// share group "workers" reading from the earliest offset.
func startShareMember(t *testing.T) (*Broker, *kgo.Client, string, [16]byte) {
	t.Helper()
	b := startBroker(t, nil)
	client := franzClient(t, b)
	franzCreateTopic(t, client, "jobs", 1)
	setGroupConfigs(t, client, "workers", map[string]string{"share.auto.offset.reset": "earliest"})
	produceNumbered(t, b, "jobs", 10)
	join := kmsg.NewPtrShareGroupHeartbeatRequest()
	join.GroupID, join.MemberEpoch, join.SubscribedTopicNames = "workers", 0, []string{"jobs"}
	joined, err := join.RequestWith(groupTestContext(t), client)
	if err != nil || joined.ErrorCode != 0 || joined.MemberID == nil {
		t.Fatalf("share group heartbeat: %v %+v", err, joined)
	}
	topicID := b.coordinator.Metadata().Topics["jobs"].ID
	return b, client, *joined.MemberID, topicID
}

// TestShareSessionReopenedReleasesRecords: a member that opens a new share session (epoch 0) while
// its old one holds records gets them back at once, delivered a second time, instead of finding
// them locked to the session its client has dropped until the locks run out (30 s). franz-go
// resets its session after an error and drops what an answer in flight had acquired; under load
// in the 20-worker acceptance test this held a whole in-flight window for 30 s.
func TestShareSessionReopenedReleasesRecords(t *testing.T) {
	_, client, member, topicID := startShareMember(t)

	first := shareFetchAt(t, client, topicID, member, 0)
	if len(first) != 1 || first[0].FirstOffset != 0 || first[0].LastOffset != 9 || first[0].DeliveryCount != 1 {
		t.Fatalf("first session acquired %+v, want offsets 0-9 delivered once", first)
	}
	again := shareFetchAt(t, client, topicID, member, 0)
	if len(again) != 1 || again[0].FirstOffset != 0 || again[0].LastOffset != 9 || again[0].DeliveryCount != 2 {
		t.Fatalf("a new session acquired %+v, want offsets 0-9 again, delivered a second time", again)
	}
}

// TestClosingBrokerAcquiresNothing: once the broker is closing, a ShareFetch acquires no records.
// The sessions of connections closed during shutdown release what they held; a fetch on a
// connection not closed yet would acquire it only to lose it with its own connection, counting a
// delivery each time (records reached the delivery limit within 70 ms of a restart).
func TestClosingBrokerAcquiresNothing(t *testing.T) {
	b, client, member, topicID := startShareMember(t)

	b.closing.Store(true) // what Close sets before it closes the connections
	if acquired := shareFetchAt(t, client, topicID, member, 0); len(acquired) != 0 {
		t.Fatalf("a closing broker handed out %+v", acquired)
	}
	b.closing.Store(false) // the test's own Close sets it again
	acquired := shareFetchAt(t, client, topicID, member, 0)
	if len(acquired) != 1 || acquired[0].FirstOffset != 0 || acquired[0].LastOffset != 9 || acquired[0].DeliveryCount != 1 {
		t.Fatalf("after the closing fetch: acquired %+v, want offsets 0-9 delivered once", acquired)
	}
}
