package broker

// Idempotent producers over a real socket: InitProducerId answers and refusals, then produce
// requests carrying producer ids: a retried batch is answered with its first offset and stored once,
// a gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45), an old epoch INVALID_PRODUCER_EPOCH (47).

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol"
)

// idempotentBatch builds a batch of values from producer id at epoch, starting at sequence.
func idempotentBatch(id int64, epoch int16, sequence int32, values ...string) []byte {
	var builder batch.Builder
	builder.Reset(batchTime)
	for i, value := range values {
		builder.Add(batch.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(value)})
	}
	builder.ProducerID, builder.ProducerEpoch, builder.BaseSequence = id, epoch, sequence
	return bytes.Clone(builder.Finish())
}

// initProducerID sends InitProducerId at version with an optional transactional id and (v3+) the
// producer's current id and epoch.
func (c *testConn) initProducerID(version int16, transactionalID *string, id int64, epoch int16) *kmsg.InitProducerIDResponse {
	c.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(version)
	req.TransactionalID = transactionalID
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = id, epoch
	return roundTrip[*kmsg.InitProducerIDResponse](c, req)
}

func TestInitProducerID(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	b := startBrokerWith(t, cfg)
	c := dial(t, b)
	seen := map[int64]bool{}
	fresh := func(c *testConn, version int16) int64 {
		t.Helper()
		resp := c.initProducerID(version, nil, -1, -1)
		if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 || seen[resp.ProducerID] {
			t.Fatalf("v%d: error %d, producer %d epoch %d (ids so far %v)", version, resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch, seen)
		}
		seen[resp.ProducerID] = true
		return resp.ProducerID
	}
	for version := int16(0); version <= 4; version++ {
		fresh(c, version)
	}
	refused := func(want protocol.ErrorCode, version int16, transactionalID *string, id int64, epoch int16) {
		t.Helper()
		resp := c.initProducerID(version, transactionalID, id, epoch)
		if resp.ErrorCode != want.Code || resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
			t.Fatalf("v%d txn %v id %d epoch %d: error %d producer %d epoch %d, want %s", version, deref(transactionalID), id, epoch,
				resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch, want.Name)
		}
	}
	// A transactional id keeps its producer id; each InitProducerId bumps the epoch (fencing the
	// previous instance; txn_franz_test.go covers transactions themselves).
	txn, empty := "orders-txn", ""
	txnProducer := int64(-1)
	for version := int16(0); version <= 4; version++ {
		resp := c.initProducerID(version, &txn, -1, -1)
		if resp.ErrorCode != 0 || resp.ProducerEpoch != version || (version > 0 && resp.ProducerID != txnProducer) {
			t.Fatalf("v%d txn %s: error %d producer %d epoch %d, want producer %d epoch %d", version, txn, resp.ErrorCode,
				resp.ProducerID, resp.ProducerEpoch, txnProducer, version)
		}
		txnProducer = resp.ProducerID
		refused(protocol.InvalidRequest, version, &empty, -1, -1)
	}
	refused(protocol.InvalidRequest, 3, nil, 5, -1)
	refused(protocol.InvalidRequest, 4, nil, -1, 0)

	// KIP-360: v3+ with the current id and epoch bumps the epoch of that id.
	id := fresh(c, 4)
	for epoch := int16(0); epoch < 3; epoch++ {
		resp := c.initProducerID(4, nil, id, epoch)
		if resp.ErrorCode != 0 || resp.ProducerID != id || resp.ProducerEpoch != epoch+1 {
			t.Fatalf("bump of %d/%d: error %d, producer %d epoch %d", id, epoch, resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
		}
	}
	// Before v3 the fields do not exist: a fresh id.
	if resp := c.initProducerID(2, nil, id, 3); resp.ProducerID == id {
		t.Fatal("v2 bumped an epoch it cannot have been sent")
	}
	// An id the cluster never issued, or an epoch at the top, gets a fresh id.
	for _, tc := range []struct {
		id    int64
		epoch int16
	}{{1 << 40, 0}, {id, 32766}, {id, 32767}} {
		resp := c.initProducerID(3, nil, tc.id, tc.epoch)
		if resp.ErrorCode != 0 || resp.ProducerID == tc.id || resp.ProducerEpoch != 0 || seen[resp.ProducerID] {
			t.Fatalf("id %d epoch %d: error %d, producer %d epoch %d", tc.id, tc.epoch, resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
		}
		seen[resp.ProducerID] = true
	}

	// Ids stay unique across a restart: the rest of the broker's block is skipped, never reused.
	highest := int64(-1)
	for id := range seen {
		highest = max(highest, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.NewSet()
	b = startBrokerWith(t, cfg)
	c = dial(t, b)
	if after := fresh(c, 4); after <= highest {
		t.Fatalf("after a restart the broker handed out %d, at or below %d handed out before", after, highest)
	}
}

func TestIdempotentProduce(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	const topic = "idempotent"
	c.createTopic(topic, 1, nil)
	init := c.initProducerID(4, nil, -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: error %d", init.ErrorCode)
	}
	id := init.ProducerID
	produce := func(t *testing.T, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
		t.Helper()
		return c.in(t).produceWith(produceRequest(9, acks, topic, 0, records))
	}
	accepted := func(t *testing.T, acks int16, records []byte, wantOffset int64) {
		t.Helper()
		if result := produce(t, acks, records); result.ErrorCode != 0 || result.BaseOffset != wantOffset {
			t.Fatalf("produce: error %d (%v), offset %d, want offset %d", result.ErrorCode, deref(result.ErrorMessage), result.BaseOffset, wantOffset)
		}
	}
	refused := func(t *testing.T, records []byte, want protocol.ErrorCode) {
		t.Helper()
		for _, acks := range []int16{1, -1} {
			if result := produce(t, acks, records); result.ErrorCode != want.Code {
				t.Fatalf("acks=%d: error %d (%v), want %d %s", acks, result.ErrorCode, deref(result.ErrorMessage), want.Code, want.Name)
			}
		}
	}

	first := idempotentBatch(id, 0, 0, "a", "b", "c")
	accepted(t, -1, bytes.Clone(first), 0)
	t.Run("retried batch is answered with its first offset and stored once", func(t *testing.T) {
		accepted(t, 1, bytes.Clone(first), 0)
		accepted(t, -1, bytes.Clone(first), 0)
		accepted(t, 1, idempotentBatch(id, 0, 3, "d"), 3)
		accepted(t, -1, bytes.Clone(first), 0) // still among the last five
		accepted(t, 1, idempotentBatch(id, 0, 3, "d"), 3)
		assertRecords(t, c.in(t).readAll(topic, 0), "a", "b", "c", "d")
	})
	t.Run("a damaged retry is refused as damaged", func(t *testing.T) {
		damaged := bytes.Clone(first)
		damaged[len(damaged)-1] ^= 1
		refused(t, damaged, protocol.CorruptMessage)
	})
	t.Run("a gap is out of order", func(t *testing.T) {
		refused(t, idempotentBatch(id, 0, 5, "skipped 4"), protocol.OutOfOrderSequenceNumber)
		refused(t, idempotentBatch(id, 0, 2, "overlaps"), protocol.OutOfOrderSequenceNumber)
		refused(t, idempotentBatch(id, 0, 0, "a", "b"), protocol.OutOfOrderSequenceNumber) // same start, other end
	})
	t.Run("a negative sequence is invalid", func(t *testing.T) {
		refused(t, idempotentBatch(id, 0, -1, "no sequence"), protocol.InvalidRecord)
	})
	t.Run("a new epoch starts at 0 and fences the old one", func(t *testing.T) {
		bumped := c.in(t).initProducerID(4, nil, id, 0)
		if bumped.ErrorCode != 0 || bumped.ProducerID != id || bumped.ProducerEpoch != 1 {
			t.Fatalf("bump: %+v", bumped)
		}
		refused(t, idempotentBatch(id, 1, 4, "continuing"), protocol.OutOfOrderSequenceNumber)
		accepted(t, 1, idempotentBatch(id, 1, 0, "e"), 4)
		refused(t, idempotentBatch(id, 0, 4, "zombie"), protocol.InvalidProducerEpoch)
		refused(t, bytes.Clone(first), protocol.InvalidProducerEpoch) // an old-epoch retry is fenced, not a duplicate
		accepted(t, -1, idempotentBatch(id, 1, 1, "f", "g"), 5)
	})
	t.Run("producers and plain batches do not disturb each other", func(t *testing.T) {
		other := c.in(t).initProducerID(4, nil, -1, -1).ProducerID
		accepted(t, 1, idempotentBatch(other, 0, 0, "h"), 7)
		accepted(t, 1, recordBatch(batchTime, "plain"), 8)
		accepted(t, 1, recordBatch(batchTime, "plain"), 9) // no producer id: never a duplicate
		accepted(t, 1, idempotentBatch(id, 1, 3, "i"), 10)
		accepted(t, 1, idempotentBatch(other, 0, 0, "h"), 7)
	})
	t.Run("several batches in one request", func(t *testing.T) {
		records := append(idempotentBatch(id, 1, 4, "j"), idempotentBatch(id, 1, 5, "k")...)
		accepted(t, 1, records, 11)
		accepted(t, 1, bytes.Clone(records), 11) // the retry of both
		refused(t, append(idempotentBatch(id, 1, 6, "l"), idempotentBatch(id, 1, 6, "l")...), protocol.OutOfOrderSequenceNumber)
	})
	assertRecords(t, c.readAll(topic, 0), "a", "b", "c", "d", "e", "f", "g", "h", "plain", "plain", "i", "j", "k")
	// The refusals and duplicates appended nothing, and the log still takes the next batch.
	accepted(t, 1, idempotentBatch(id, 1, 6, "l"), 13)
}

// TestIdempotentProduceConcurrentRetries sends every batch of one producer on several connections at
// once, as a client retrying on a new connection while the first attempt is still in flight does:
// check, append and record are one step, so each batch is stored once and every copy is answered
// with its offset.
func TestIdempotentProduceConcurrentRetries(t *testing.T) {
	const topic, connections, batches = "retried", 4, 200
	b := startBroker(t, nil)
	setup := dial(t, b)
	setup.createTopic(topic, 1, nil)
	id := setup.initProducerID(4, nil, -1, -1).ProducerID
	conns := make([]*testConn, connections)
	for i := range conns {
		conns[i] = dial(t, b)
	}
	for n := range batches {
		records := idempotentBatch(id, 0, int32(2*n), fmt.Sprint(2*n), fmt.Sprint(2*n+1))
		// Send on every connection first, then read the answers: the copies race in the broker.
		correlations := make([]int32, connections)
		requests := make([]*kmsg.ProduceRequest, connections)
		for i, c := range conns {
			requests[i] = produceRequest(9, int16(1-2*(i%2)), topic, 0, bytes.Clone(records)) // acks 1 and -1
			correlations[i] = c.send(requests[i])
		}
		for i, c := range conns {
			resp := c.receive(requests[i], correlations[i]).(*kmsg.ProduceResponse)
			result := resp.Topics[0].Partitions[0]
			if result.ErrorCode != 0 || result.BaseOffset != int64(2*n) {
				t.Fatalf("batch %d on connection %d: error %d (%v), offset %d, want %d", n, i, result.ErrorCode,
					deref(result.ErrorMessage), result.BaseOffset, 2*n)
			}
		}
	}
	got := setup.readAll(topic, 0)
	if len(got) != 2*batches {
		t.Fatalf("the log holds %d records, want %d", len(got), 2*batches)
	}
	for i, r := range got {
		if r.offset != int64(i) || r.value != fmt.Sprint(i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

func TestDecideProducerID(t *testing.T) {
	const issuedBelow = 2000
	for _, tc := range []struct {
		id    int64
		epoch int16
		want  producerIDRequest
	}{
		{-1, -1, producerIDFresh},
		{5, -1, producerIDInvalid},
		{-1, 0, producerIDInvalid},
		{-2, -2, producerIDInvalid},
		{5, -2, producerIDInvalid},
		{0, 0, producerIDBump},
		{1999, 7, producerIDBump},
		{5, 32765, producerIDBump},
		{5, 32766, producerIDFresh}, // the bump would reach MaxInt16, which Kafka keeps unused
		{5, 32767, producerIDFresh},
		{2000, 0, producerIDFresh}, // never issued
		{1 << 62, 3, producerIDFresh},
	} {
		if got := decideProducerID(tc.id, tc.epoch, issuedBelow); got != tc.want {
			t.Errorf("decideProducerID(%d, %d) = %d, want %d", tc.id, tc.epoch, got, tc.want)
		}
	}
}

// TestIdempotentProduceAcrossRestart: producer state is rebuilt from the log's tail after a restart,
// so a retry of a batch appended before it is still answered with its first offset, and gaps and
// fenced epochs are still refused.
func TestIdempotentProduceAcrossRestart(t *testing.T) {
	const topic = "restarted"
	cfg := testConfig(t, t.TempDir())
	b := startBrokerWith(t, cfg)
	c := dial(t, b)
	c.createTopic(topic, 1, nil)
	id := c.initProducerID(4, nil, -1, -1).ProducerID
	other := c.initProducerID(4, nil, -1, -1).ProducerID
	for n := range int32(10) {
		c.mustProduce(topic, 0, idempotentBatch(id, 0, 2*n, fmt.Sprint(2*n), fmt.Sprint(2*n+1)))
	}
	c.mustProduce(topic, 0, idempotentBatch(other, 0, 0, "other"))
	if bumped := c.initProducerID(4, nil, id, 0); bumped.ProducerEpoch != 1 {
		t.Fatalf("bump: %+v", bumped)
	}
	last := idempotentBatch(id, 1, 0, "after the bump")
	c.mustProduce(topic, 0, bytes.Clone(last)) // offset 21
	c.mustProduce(topic, 0, recordBatch(batchTime, "plain"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.NewSet()
	b = startBrokerWith(t, cfg)
	c = dial(t, b)
	expect := func(records []byte, wantCode protocol.ErrorCode, wantOffset int64) {
		t.Helper()
		result := c.produce(topic, 0, records)
		if result.ErrorCode != wantCode.Code || (wantCode.Code == 0 && result.BaseOffset != wantOffset) {
			t.Fatalf("error %d (%v) offset %d, want %s at %d", result.ErrorCode, deref(result.ErrorMessage), result.BaseOffset, wantCode.Name, wantOffset)
		}
	}
	expect(bytes.Clone(last), protocol.None, 21)                                   // a retry from before the restart
	expect(idempotentBatch(other, 0, 0, "other"), protocol.None, 20)               // another producer's retry
	expect(idempotentBatch(id, 0, 20, "zombie"), protocol.InvalidProducerEpoch, 0) // the bump survived
	expect(idempotentBatch(id, 1, 2, "gap"), protocol.OutOfOrderSequenceNumber, 0) // so did the sequence
	expect(idempotentBatch(id, 1, 1, "next"), protocol.None, 23)                   // and it continues
	expect(idempotentBatch(other, 0, 1, "other next"), protocol.None, 24)          // both do
	if got := c.readAll(topic, 0); len(got) != 25 || got[21].value != "after the bump" || got[22].value != "plain" {
		t.Fatalf("%d records after the restart: %+v", len(got), got)
	}
}
