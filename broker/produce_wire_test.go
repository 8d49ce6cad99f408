package broker

// Produce refusals over a real socket: each bad produce gets its exact Kafka error code and leaves
// nothing in the log; afterwards a good produce and a fetch show exactly the good data.

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
)

// legacyMessage encodes one message of the pre-v2 formats (magic 0 or 1) with its log header.
func legacyMessage(magic byte, value string) []byte {
	var message []byte
	message = append(message, magic, 0) // magic, attributes
	if magic == 1 {
		message = binary.BigEndian.AppendUint64(message, uint64(batchTime.UnixMilli()))
	}
	message = binary.BigEndian.AppendUint32(message, 0xffffffff) // null key
	message = binary.BigEndian.AppendUint32(message, uint32(len(value)))
	message = append(message, value...)
	crc := crc32.ChecksumIEEE(message)
	entry := binary.BigEndian.AppendUint64(nil, 0) // offset
	entry = binary.BigEndian.AppendUint32(entry, uint32(4+len(message)))
	entry = binary.BigEndian.AppendUint32(entry, crc)
	return append(entry, message...)
}

func TestProduceRefusals(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	const topic = "refusals"
	c.createTopic(topic, 1, nil)
	c.createTopic("limited", 1, map[string]string{"max.message.bytes": "1024"})

	refused := func(t *testing.T, want protocol.ErrorCode, req *kmsg.ProduceRequest) {
		c := c.in(t)
		t.Helper()
		result := c.produceWith(req)
		if result.ErrorCode != want.Code {
			t.Fatalf("produce answered error %d (%v), want %d %s", result.ErrorCode, deref(result.ErrorMessage), want.Code, want.Name)
		}
	}
	refusedRecords := func(t *testing.T, want protocol.ErrorCode, records []byte) {
		t.Helper()
		refused(t, want, produceRequest(9, 1, topic, 0, records))
		refused(t, want, produceRequest(3, -1, topic, 0, records))
	}

	t.Run("bad crc", func(t *testing.T) {
		records := recordBatch(batchTime, "flipped")
		records[len(records)-2] ^= 0x40
		refusedRecords(t, protocol.CorruptMessage, records)
	})
	t.Run("magic 0 and 1", func(t *testing.T) {
		for _, magic := range []byte{0, 1} {
			refusedRecords(t, protocol.CorruptMessage, legacyMessage(magic, "old"))
			refusedRecords(t, protocol.CorruptMessage, legacyMessage(magic, strings.Repeat("old format ", 20)))
		}
	})
	t.Run("record count disagrees with last offset delta", func(t *testing.T) {
		records := recordBatch(batchTime, "a", "b", "c")
		binary.BigEndian.PutUint32(records[23:], 5) // lastOffsetDelta 5 for 3 records
		batch.SetCRC(records)
		refusedRecords(t, protocol.InvalidRecord, records)
	})
	t.Run("control batch", func(t *testing.T) {
		records := recordBatch(batchTime, "commit marker")
		binary.BigEndian.PutUint16(records[21:], batch.AttributeControl)
		batch.SetCRC(records)
		refusedRecords(t, protocol.InvalidRecord, records)
	})
	t.Run("structurally broken", func(t *testing.T) {
		good := recordBatch(batchTime, "whole")
		refusedRecords(t, protocol.CorruptMessage, good[:len(good)-3])           // cut inside the records
		refusedRecords(t, protocol.CorruptMessage, good[:40])                    // cut inside the header
		refusedRecords(t, protocol.CorruptMessage, bytes.Repeat([]byte{0}, 100)) // zeroes
	})
	t.Run("one bad batch refuses the partition's whole append", func(t *testing.T) {
		bad := recordBatch(batchTime, "bad")
		bad[len(bad)-1] ^= 1
		records := append(recordBatch(batchTime, "good but sent with a bad one"), bad...)
		refusedRecords(t, protocol.CorruptMessage, records)
	})
	t.Run("acks outside -1, 0, 1", func(t *testing.T) {
		for _, acks := range []int16{2, -2, 100} {
			refused(t, protocol.InvalidRequiredAcks, produceRequest(9, acks, topic, 0, recordBatch(batchTime, "acks")))
		}
	})
	t.Run("batch above max.message.bytes", func(t *testing.T) {
		c := c.in(t)
		big := recordBatch(batchTime, strings.Repeat("x", 2000))
		refused(t, protocol.MessageTooLarge, produceRequest(9, 1, "limited", 0, big))
		if offset := c.mustProduce("limited", 0, recordBatch(batchTime, strings.Repeat("y", 500))); offset != 0 {
			t.Fatalf("a batch within the limit went to offset %d, want 0", offset)
		}
	})
	t.Run("unknown topic or partition", func(t *testing.T) {
		refused(t, protocol.UnknownTopicOrPartition, produceRequest(9, 1, "no-such-topic", 0, recordBatch(batchTime, "lost")))
		refused(t, protocol.UnknownTopicOrPartition, produceRequest(9, 1, topic, 1, recordBatch(batchTime, "lost")))
		refused(t, protocol.UnknownTopicOrPartition, produceRequest(9, 1, topic, -1, recordBatch(batchTime, "lost")))
	})
	t.Run("empty records", func(t *testing.T) {
		// Kafka's ProduceRequest.validateRecords refuses a partition without a batch.
		refusedRecords(t, protocol.CorruptMessage, nil)
		refusedRecords(t, protocol.CorruptMessage, []byte{})
	})
	t.Run("transactional request with a plain batch", func(t *testing.T) {
		req := produceRequest(9, -1, topic, 0, recordBatch(batchTime, "txn"))
		id := "txn-1"
		req.TransactionID = &id
		refused(t, protocol.InvalidRecord, req)
	})

	// Nothing refused reached the log.
	if result := c.fetchPartition(fetchRequest(12, topic, 0, 0, 1<<20)); result.HighWatermark != 0 || len(result.RecordBatches) != 0 {
		t.Fatalf("after refused produces: high watermark %d, %d record bytes", result.HighWatermark, len(result.RecordBatches))
	}

	t.Run("acks=0 gets no response and the next request is answered in order", func(t *testing.T) {
		c := c.in(t)
		first := c.send(produceRequest(9, 0, topic, 0, recordBatch(batchTime, "fire", "and forget")))
		bad := recordBatch(batchTime, "bad and unanswered")
		bad[len(bad)-1] ^= 1
		second := c.send(produceRequest(7, 0, topic, 0, bad))
		third := c.send(produceRequest(9, 0, "no-such-topic", 0, recordBatch(batchTime, "lost")))
		metadata := kmsg.NewPtrMetadataRequest()
		metadata.SetVersion(12)
		fourth := c.send(metadata)
		// receive fails unless the very next frame answers the Metadata request.
		c.receive(metadata, fourth)
		if first+1 != second || second+1 != third || third+1 != fourth {
			t.Fatal("correlation ids not consecutive")
		}
		produced := produceRequest(9, 1, topic, 0, recordBatch(batchTime, "acked"))
		if result := c.produceWith(produced); result.ErrorCode != 0 || result.BaseOffset != 2 {
			t.Fatalf("produce after acks=0: error %d, base offset %d; want 0 and 2", result.ErrorCode, result.BaseOffset)
		}
	})

	t.Run("good produce after the bad ones", func(t *testing.T) {
		c := c.in(t)
		if offset := c.mustProduce(topic, 0, recordBatch(batchTime, "good", "data")); offset != 3 {
			t.Fatalf("base offset %d, want 3", offset)
		}
		req := produceRequest(3, -1, topic, 0, recordBatch(batchTime, "durable"))
		if result := c.produceWith(req); result.ErrorCode != 0 || result.BaseOffset != 5 {
			t.Fatalf("acks=-1 produce v3: error %d, base offset %d", result.ErrorCode, result.BaseOffset)
		}
		assertRecords(t, dial(t, b).readAll(topic, 0), "fire", "and forget", "acked", "good", "data", "durable")
	})
	assertServing(t, b)
}
