package broker

// Fetch over a real socket. The broker frames fetch responses by hand around sendfile ranges, so
// every response here is decoded by kmsg (wire.DecodeResponse, which also rejects trailing or
// missing bytes) at the request's version.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
)

// await polls cond until it holds; the hang guard bounds it.
func await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	ticker := time.NewTicker(time.Millisecond)
	defer ticker.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		<-ticker.C
	}
}

// parkedFetches counts the fetches waiting for an append to a partition.
func parkedFetches(b *Broker, topic string, index int32) int {
	p, err := b.registry.partition(topic, index)
	if err != nil {
		return 0
	}
	p.waiters.Lock()
	defer p.waiters.Unlock()
	return len(p.waiters.byOwner)
}

// fetchedVersions is every Fetch version served.
var fetchedVersions = []int16{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}

func TestFetchDecodesAtEveryVersion(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("decoded", 2, nil)
	c.createTopic("other", 1, nil)
	c.mustProduce("decoded", 0, recordBatch(batchTime, "a", "b"))
	c.mustProduce("decoded", 0, recordBatch(batchTime, "c"))
	c.mustProduce("decoded", 1, recordBatch(batchTime, "in partition one"))
	c.mustProduce("other", 0, recordBatch(batchTime, "other topic"))

	for _, version := range fetchedVersions {
		for _, isolation := range []int8{0, 1} {
			req := fetchRequest(version, "decoded", 0, 0, 1<<20)
			req.IsolationLevel = isolation
			second := kmsg.NewFetchRequestTopicPartition()
			second.Partition, second.FetchOffset, second.PartitionMaxBytes = 1, 0, 1<<20
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, second)
			other := kmsg.NewFetchRequestTopic()
			other.Topic = "other"
			otherPartition := kmsg.NewFetchRequestTopicPartition()
			otherPartition.PartitionMaxBytes = 1 << 20
			other.Partitions = append(other.Partitions, otherPartition)
			req.Topics = append(req.Topics, other)

			resp := roundTrip[*kmsg.FetchResponse](c, req) // decodes exactly, or fails
			label := fmt.Sprintf("v%d isolation %d", version, isolation)
			if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 2 || resp.Topics[0].Topic != "decoded" || resp.Topics[1].Topic != "other" {
				t.Fatalf("%s: error %d, session %d, topics %d", label, resp.ErrorCode, resp.SessionID, len(resp.Topics))
			}
			want := map[string][]string{"decoded-0": {"a", "b", "c"}, "decoded-1": {"in partition one"}, "other-0": {"other topic"}}
			for _, topic := range resp.Topics {
				for _, p := range topic.Partitions {
					key := fmt.Sprintf("%s-%d", topic.Topic, p.Partition)
					values := want[key]
					if p.ErrorCode != 0 || p.HighWatermark != int64(len(values)) || p.LastStableOffset != p.HighWatermark {
						t.Errorf("%s %s: error %d, high watermark %d, last stable %d", label, key, p.ErrorCode, p.HighWatermark, p.LastStableOffset)
					}
					if version >= 5 && p.LogStartOffset != 0 {
						t.Errorf("%s %s: log start offset %d", label, key, p.LogStartOffset)
					}
					if isolation == 1 && (p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0) {
						t.Errorf("%s %s: aborted transactions %v, want an empty list", label, key, p.AbortedTransactions)
					}
					if version >= 11 && p.PreferredReadReplica != -1 {
						t.Errorf("%s %s: preferred read replica %d", label, key, p.PreferredReadReplica)
					}
					records, err := decodeBatches(p.RecordBatches)
					if err != nil {
						t.Fatalf("%s %s: %v", label, key, err)
					}
					assertRecords(t, records, values...)
					delete(want, key)
				}
			}
			if len(want) != 0 {
				t.Errorf("%s: partitions missing from the response: %v", label, want)
			}
		}
	}
}

func TestFetchRefusals(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("short", 1, nil)
	c.mustProduce("short", 0, recordBatch(batchTime, "0", "1", "2", "3", "4"))

	t.Run("offset out of range", func(t *testing.T) {
		c := c.in(t)
		for _, version := range fetchedVersions {
			for _, offset := range []int64{6, 100, -1} {
				result := c.fetchPartition(fetchRequest(version, "short", 0, offset, 1<<20))
				if result.ErrorCode != protocol.OffsetOutOfRange.Code || result.HighWatermark != 5 || len(result.RecordBatches) != 0 {
					t.Errorf("v%d offset %d: error %d, high watermark %d, %d bytes; want 1 and 5", version, offset, result.ErrorCode, result.HighWatermark, len(result.RecordBatches))
				}
			}
			// The log end itself is in range: nothing to send yet.
			if result := c.fetchPartition(fetchRequest(version, "short", 0, 5, 1<<20)); result.ErrorCode != 0 || len(result.RecordBatches) != 0 {
				t.Errorf("v%d at the log end: error %d, %d bytes", version, result.ErrorCode, len(result.RecordBatches))
			}
		}
	})
	t.Run("fetch sessions are declined", func(t *testing.T) {
		c := c.in(t)
		for _, version := range []int16{7, 11, 12} {
			req := fetchRequest(version, "short", 0, 0, 1<<20)
			req.SessionID, req.SessionEpoch = 12345, 1
			resp := roundTrip[*kmsg.FetchResponse](c, req)
			if resp.ErrorCode != protocol.FetchSessionIDNotFound.Code || resp.SessionID != 0 || len(resp.Topics) != 0 {
				t.Errorf("v%d session 12345: error %d, session %d, %d topics; want 70, 0 and none", version, resp.ErrorCode, resp.SessionID, len(resp.Topics))
			}
		}
		// A client asking to open a session (id 0, epoch 0) gets session id 0: a full fetch.
		req := fetchRequest(12, "short", 0, 0, 1<<20)
		req.SessionID, req.SessionEpoch = 0, 0
		if resp := roundTrip[*kmsg.FetchResponse](c, req); resp.ErrorCode != 0 || resp.SessionID != 0 {
			t.Errorf("new session: error %d, session %d", resp.ErrorCode, resp.SessionID)
		}
	})
	t.Run("unknown partitions answer at once", func(t *testing.T) {
		c := c.in(t)
		for _, tc := range []struct {
			topic     string
			partition int32
		}{{"absent", 0}, {"short", 1}} {
			req := fetchRequest(12, tc.topic, tc.partition, 0, 1<<20)
			req.MinBytes, req.MaxWaitMillis = 1, 60_000 // would outlast the hang guard if parked
			if result := c.fetchPartition(req); result.ErrorCode != protocol.UnknownTopicOrPartition.Code {
				t.Errorf("%s-%d: error %d, want 3", tc.topic, tc.partition, result.ErrorCode)
			}
		}
	})
	t.Run("leader epochs", func(t *testing.T) {
		c := c.in(t)
		epoch := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, false, "short"))).Partitions[0].LeaderEpoch
		req := fetchRequest(12, "short", 0, 0, 1<<20)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch + 1
		if result := c.fetchPartition(req); result.ErrorCode != protocol.UnknownLeaderEpoch.Code {
			t.Errorf("newer epoch: error %d, want 76", result.ErrorCode)
		}
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
		if result := c.fetchPartition(req); result.ErrorCode != 0 {
			t.Errorf("current epoch: error %d", result.ErrorCode)
		}
	})
}

func TestFetchLongPollWakesOnProduce(t *testing.T) {
	b := startBroker(t, nil)
	setup := dial(t, b)
	setup.createTopic("quiet", 2, nil)

	for _, version := range []int16{4, 12} {
		poller := dial(t, b)
		req := fetchRequest(version, "quiet", 0, int64(version/12), 1<<20) // v12 starts after v4's record
		second := kmsg.NewFetchRequestTopicPartition()
		second.Partition, second.FetchOffset, second.PartitionMaxBytes = 1, 0, 1<<20
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, second)
		req.MinBytes, req.MaxWaitMillis = 1, 10_000
		// The long poll must end on the append, not at its 10 s max wait. If it did not, the expiry
		// would still find the data, so the deadline is what tells the two apart; correct runs
		// answer in milliseconds.
		if err := poller.conn.SetReadDeadline(time.Now().Add(8 * time.Second)); err != nil {
			t.Fatal(err)
		}
		correlation := poller.send(req)
		await(t, "the fetch to park", func() bool { return parkedFetches(b, "quiet", 0) == 1 && parkedFetches(b, "quiet", 1) == 1 })

		value := fmt.Sprint("woken v", version)
		dial(t, b).mustProduce("quiet", 0, recordBatch(batchTime, value))

		resp := poller.receive(req, correlation).(*kmsg.FetchResponse)
		partitions := resp.Topics[0].Partitions
		if len(partitions) != 2 || partitions[0].ErrorCode != 0 || partitions[1].ErrorCode != 0 || len(partitions[1].RecordBatches) != 0 {
			t.Fatalf("v%d: %+v", version, partitions)
		}
		records, err := decodeBatches(partitions[0].RecordBatches)
		if err != nil || len(records) != 1 || records[0].value != value {
			t.Fatalf("v%d: woken fetch returned %+v (%v), want %q", version, records, err, value)
		}
		await(t, "the fetch to unpark", func() bool { return parkedFetches(b, "quiet", 0) == 0 && parkedFetches(b, "quiet", 1) == 0 })
	}
}

func TestFetchAlwaysReturnsOneWholeBatch(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("big", 2, nil)
	large := strings.Repeat("L", 10_000)
	first := recordBatch(batchTime, large, "tail")
	c.mustProduce("big", 0, first)
	c.mustProduce("big", 0, recordBatch(batchTime, "second batch"))
	c.mustProduce("big", 1, recordBatch(batchTime, "other partition"))

	// KIP-74: a byte budget smaller than the first batch still gets that batch, whole.
	for _, version := range fetchedVersions {
		result := c.fetchPartition(fetchRequest(version, "big", 0, 0, 1))
		if len(result.RecordBatches) != len(first) {
			t.Fatalf("v%d partition max bytes 1: %d bytes, want the first batch's %d", version, len(result.RecordBatches), len(first))
		}
		records, err := decodeBatches(result.RecordBatches)
		if err != nil {
			t.Fatal(err)
		}
		assertRecords(t, records, large, "tail")
	}
	// Fetching from inside a batch starts at that batch (offset 1 is in the first).
	result := c.fetchPartition(fetchRequest(12, "big", 0, 1, 1))
	if h, err := batch.Validate(result.RecordBatches); err != nil || h.BaseOffset != 0 {
		t.Fatalf("fetch at offset 1: batch at %d (%v), want the batch at 0", h.BaseOffset, err)
	}

	// A request budget of 1 byte: the first partition with data gets one whole batch, the next none.
	req := fetchRequest(12, "big", 0, 0, 1<<20)
	req.MaxBytes = 1
	other := kmsg.NewFetchRequestTopicPartition()
	other.Partition, other.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, other)
	resp := roundTrip[*kmsg.FetchResponse](c, req)
	partitions := resp.Topics[0].Partitions
	if len(partitions) != 2 || len(partitions[0].RecordBatches) != len(first) || len(partitions[1].RecordBatches) != 0 {
		t.Fatalf("max bytes 1: partition 0 got %d bytes (want %d), partition 1 %d (want 0)",
			len(partitions[0].RecordBatches), len(first), len(partitions[1].RecordBatches))
	}

	// A budget ending inside the second batch: the first whole, then at most a partial one,
	// which clients drop.
	result = c.fetchPartition(fetchRequest(12, "big", 0, 0, int32(len(first)+20)))
	records, err := decodeBatches(result.RecordBatches)
	if err != nil || len(result.RecordBatches) > len(first)+20 {
		t.Fatalf("budget inside the second batch: %d bytes (%v)", len(result.RecordBatches), err)
	}
	assertRecords(t, records, large, "tail")
}

func TestFetchLongPollEndsWhenTopicIsDeleted(t *testing.T) {
	b := startBroker(t, nil)
	admin := dial(t, b)
	admin.createTopic("vanishing", 1, nil)

	poller := dial(t, b)
	req := fetchRequest(12, "vanishing", 0, 0, 1<<20)
	req.MinBytes, req.MaxWaitMillis = 1, 10_000
	// As above: below the max wait, so that only a wake-up on the deletion passes.
	if err := poller.conn.SetReadDeadline(time.Now().Add(8 * time.Second)); err != nil {
		t.Fatal(err)
	}
	correlation := poller.send(req)
	await(t, "the fetch to park", func() bool { return parkedFetches(b, "vanishing", 0) == 1 })

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TimeoutMillis = 10_000
	del.TopicNames = []string{"vanishing"}
	if resp := roundTrip[*kmsg.DeleteTopicsResponse](admin, del); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: error %d", resp.Topics[0].ErrorCode)
	}
	resp := poller.receive(req, correlation).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != protocol.UnknownTopicOrPartition.Code || len(p.RecordBatches) != 0 {
		t.Fatalf("parked fetch after deletion: error %d, %d bytes; want 3", p.ErrorCode, len(p.RecordBatches))
	}
	assertServing(t, b)
}
