package broker

// A raw-socket test client over protocol/wire: every request is a kmsg request at a version the test
// picks, or bytes the test writes verbatim. Nothing here retries or negotiates, so what the tests
// assert is exactly what the broker put on the wire.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/protocol/wire"
)

// hangGuard bounds every read and write of a test connection so that a broker that never answers
// fails the test instead of hanging it. It is not a timing assertion: correct runs finish in
// milliseconds.
const hangGuard = 15 * time.Second

// maxResponseBytes is the largest response frame the client reads.
const maxResponseBytes = 64 << 20

// testConn is one client connection to a broker under test. Its helpers fail the test they are bound
// to: in a subtest, use c.in(t).
type testConn struct {
	t               testing.TB
	conn            net.Conn
	nextCorrelation *int32
	// broker resolves topic names and ids for Produce and Fetch v13+ (topic_ids_test.go).
	broker *Broker
}

// in returns the same connection bound to t.
func (c *testConn) in(t testing.TB) *testConn {
	return &testConn{t: t, conn: c.conn, nextCorrelation: c.nextCorrelation, broker: c.broker}
}

// dial opens a connection to b, closed when the test ends.
func dial(t testing.TB, b *Broker) *testConn {
	t.Helper()
	conn, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatalf("dial broker: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(hangGuard)); err != nil {
		t.Fatalf("set deadline: %v", err)
	}
	first := int32(1)
	return &testConn{t: t, conn: conn, nextCorrelation: &first, broker: b}
}

// send writes req (at its current version) and returns its correlation id.
func (c *testConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.fillTopicIDs(req)
	correlation := *c.nextCorrelation
	*c.nextCorrelation++
	if err := wire.WriteFrame(c.conn, wire.EncodeRequest(correlation, "sluice-test", req)); err != nil {
		c.t.Fatalf("send %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return correlation
}

// writeRaw writes bytes verbatim: size prefixes included, if any.
func (c *testConn) writeRaw(raw []byte) {
	c.t.Helper()
	if _, err := c.conn.Write(raw); err != nil {
		c.t.Fatalf("write %d raw bytes: %v", len(raw), err)
	}
}

// writeFrame writes frame behind a correct size prefix.
func (c *testConn) writeFrame(frame []byte) {
	c.t.Helper()
	if err := wire.WriteFrame(c.conn, frame); err != nil {
		c.t.Fatalf("write frame: %v", err)
	}
}

// receive reads the next response frame, checks that it answers correlation and decodes it as the
// response to req.
func (c *testConn) receive(req kmsg.Request, correlation int32) kmsg.Response {
	c.t.Helper()
	frame, err := wire.ReadFrame(c.conn, maxResponseBytes)
	if err != nil {
		c.t.Fatalf("read response to %s v%d (correlation %d): %v", kmsg.NameForKey(req.Key()), req.GetVersion(), correlation, err)
	}
	got, err := wire.CorrelationID(frame)
	if err != nil || got != correlation {
		c.t.Fatalf("response to %s v%d: correlation id %d (%v), want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got, err, correlation)
	}
	resp, err := wire.DecodeResponse(frame, req)
	if err != nil {
		c.t.Fatalf("decode response to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	c.fillTopicNames(resp)
	return resp
}

// roundTrip sends req and returns its decoded response, typed.
func roundTrip[R kmsg.Response](c *testConn, req kmsg.Request) R {
	c.t.Helper()
	resp := c.receive(req, c.send(req))
	typed, ok := resp.(R)
	if !ok {
		c.t.Fatalf("%s response is %T", kmsg.NameForKey(req.Key()), resp)
	}
	return typed
}

// expectClosed asserts that the broker closes the connection without sending a byte.
func (c *testConn) expectClosed() {
	c.t.Helper()
	var buffer [512]byte
	n, err := c.conn.Read(buffer[:])
	switch {
	case n > 0:
		c.t.Fatalf("expected the broker to close the connection, got %d bytes: %x", n, buffer[:n])
	case isClosed(err):
	default:
		c.t.Fatalf("expected the broker to close the connection, read failed with: %v", err)
	}
}

// isClosed reports whether a read error means the peer closed the connection (an orderly close,
// or a reset when it closed with unread input).
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// errorCodeField returns the int16 ErrorCode field of a kmsg struct, if it has one.
func errorCodeField(message any) (reflect.Value, bool) {
	field := reflect.ValueOf(message).Elem().FieldByName("ErrorCode")
	return field, field.IsValid() && field.Kind() == reflect.Int16
}

// assertServing checks that the broker still answers a fresh connection: ApiVersions and Metadata.
func assertServing(t testing.TB, b *Broker) {
	t.Helper()
	c := dial(t, b)
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(3)
	versions.ClientSoftwareName, versions.ClientSoftwareVersion = "sluice-test", "1.0"
	if resp := roundTrip[*kmsg.ApiVersionsResponse](c, versions); resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions on a fresh connection: error %d, %d apis", resp.ErrorCode, len(resp.ApiKeys))
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.SetVersion(12)
	if resp := roundTrip[*kmsg.MetadataResponse](c, metadata); len(resp.Brokers) != 1 {
		t.Fatalf("Metadata on a fresh connection: %d brokers", len(resp.Brokers))
	}
}

// --- Admin and data helpers ---

func createTopicRequest(name string, partitions int32, configs map[string]string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 10_000
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, partitions, 1
	for _, key := range sortedKeys(configs) {
		config := kmsg.NewCreateTopicsRequestTopicConfig()
		value := configs[key]
		config.Name, config.Value = key, &value
		topic.Configs = append(topic.Configs, config)
	}
	req.Topics = append(req.Topics, topic)
	return req
}

// createTopic creates a topic and fails the test unless it succeeds.
func (c *testConn) createTopic(name string, partitions int32, configs map[string]string) {
	c.t.Helper()
	resp := roundTrip[*kmsg.CreateTopicsResponse](c, createTopicRequest(name, partitions, configs))
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		c.t.Fatalf("create topic %q: %+v", name, resp.Topics)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

func produceRequest(version int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produce sends one partition's records (Produce v9, acks=1) and returns the partition's result.
func (c *testConn) produce(topic string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	return c.produceWith(produceRequest(9, 1, topic, partition, records))
}

func (c *testConn) produceWith(req *kmsg.ProduceRequest) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp := roundTrip[*kmsg.ProduceResponse](c, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("produce: response has %d topics: %+v", len(resp.Topics), resp.Topics)
	}
	result := resp.Topics[0].Partitions[0]
	if resp.Topics[0].Topic != req.Topics[0].Topic || result.Partition != req.Topics[0].Partitions[0].Partition {
		c.t.Fatalf("produce answered %s-%d, asked %s-%d", resp.Topics[0].Topic, result.Partition,
			req.Topics[0].Topic, req.Topics[0].Partitions[0].Partition)
	}
	return result
}

// mustProduce produces and fails unless the broker accepts; it returns the base offset.
func (c *testConn) mustProduce(topic string, partition int32, records []byte) int64 {
	c.t.Helper()
	result := c.produce(topic, partition, records)
	if result.ErrorCode != 0 {
		c.t.Fatalf("produce to %s-%d: error %d (%v)", topic, partition, result.ErrorCode, deref(result.ErrorMessage))
	}
	return result.BaseOffset
}

func fetchRequest(version int16, topic string, partition int32, offset int64, partitionMaxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.MaxBytes = 50 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, partitionMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchPartition fetches one partition without waiting (Fetch v12 unless told) and returns its result.
func (c *testConn) fetchPartition(req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	resp := roundTrip[*kmsg.FetchResponse](c, req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("fetch v%d: error %d, %d topics", req.Version, resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// fetched is one record as a fetch returned it.
type fetched struct {
	offset    int64
	timestamp int64
	key       string
	value     string
}

// readAll fetches a partition from offset 0 to its high watermark and returns every record.
func (c *testConn) readAll(topic string, partition int32) []fetched {
	c.t.Helper()
	var records []fetched
	offset := int64(0)
	for {
		result := c.fetchPartition(fetchRequest(12, topic, partition, offset, 1<<20))
		if result.ErrorCode != 0 {
			c.t.Fatalf("fetch %s-%d at %d: error %d", topic, partition, offset, result.ErrorCode)
		}
		got, err := decodeBatches(result.RecordBatches)
		if err != nil {
			c.t.Fatalf("fetch %s-%d at %d: %v", topic, partition, offset, err)
		}
		for _, r := range got {
			if r.offset >= offset {
				records = append(records, r)
			}
		}
		if len(got) == 0 || got[len(got)-1].offset+1 >= result.HighWatermark {
			return records
		}
		offset = got[len(got)-1].offset + 1
	}
}

// decodeBatches decodes the whole record batches in a fetched byte range (a trailing partial batch
// is dropped, as clients do) and checks each batch's CRC and record count.
func decodeBatches(data []byte) ([]fetched, error) {
	var records []fetched
	for len(data) >= batch.LengthPrefix {
		size := batch.SizeAt(data)
		if size > int64(len(data)) {
			break // partial batch at the end of the range
		}
		h, err := batch.Validate(data[:size])
		if err != nil {
			return nil, fmt.Errorf("fetched batch at %d: %w", batch.BaseOffsetAt(data), err)
		}
		if h.Codec() != batch.CodecNone {
			return nil, fmt.Errorf("fetched batch at %d is compressed (codec %d)", h.BaseOffset, h.Codec())
		}
		body := data[batch.HeaderSize:size]
		for i := int32(0); i < h.RecordCount; i++ {
			length, n := binary.Varint(body)
			if n <= 0 || int64(len(body)-n) < length {
				return nil, fmt.Errorf("fetched batch at %d: record %d cut", h.BaseOffset, i)
			}
			var record kmsg.Record
			if err := record.ReadFrom(body[:n+int(length)]); err != nil {
				return nil, fmt.Errorf("fetched batch at %d: record %d: %w", h.BaseOffset, i, err)
			}
			records = append(records, fetched{
				offset:    h.BaseOffset + int64(record.OffsetDelta),
				timestamp: h.BaseTimestamp + record.TimestampDelta64,
				key:       string(record.Key),
				value:     string(record.Value),
			})
			body = body[n+int(length):]
		}
		if len(body) != 0 {
			return nil, fmt.Errorf("fetched batch at %d: %d bytes after its records", h.BaseOffset, len(body))
		}
		data = data[size:]
	}
	return records, nil
}

// recordBatch builds a valid uncompressed batch of the given values, keyed by their index.
func recordBatch(timestamp time.Time, values ...string) []byte {
	var builder batch.Builder
	builder.Reset(timestamp)
	for i, value := range values {
		builder.Add(batch.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(value)})
	}
	return bytes.Clone(builder.Finish())
}

// batchTime is the base timestamp of test batches that do not care about time.
var batchTime = time.UnixMilli(1_700_000_000_000)

// assertRecords compares fetched records with the expected values at offsets 0, 1, ...
func assertRecords(t testing.TB, got []fetched, values ...string) {
	t.Helper()
	var gotValues []string
	for i, r := range got {
		if r.offset != int64(i) {
			t.Fatalf("record %d has offset %d; records: %+v", i, r.offset, got)
		}
		gotValues = append(gotValues, r.value)
	}
	if !slices.Equal(gotValues, values) {
		t.Fatalf("records are %q, want %q", gotValues, values)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
