package client

import (
	"crypto/tls"
	"math"
	"time"
)

// Options come in three groups, one per role: Option configures the Client (connections and
// metadata), ProducerOption a Producer, ConsumerOption a Consumer. Every default is stated on the
// option that changes it.

// Option configures a Client.
type Option func(*clientConfig)

type clientConfig struct {
	seeds                  []string
	clientID               string
	dialTimeout            time.Duration
	requestTimeout         time.Duration
	metadataMaxAge         time.Duration
	allowAutoTopicCreation bool
	tls                    *tls.Config // nil: plaintext (tls.go)
	sasl                   *saslConfig // WithSASL (sasl.go)
}

func defaultClientConfig() clientConfig {
	return clientConfig{
		seeds:          []string{"127.0.0.1:9092"},
		clientID:       "sluice-client",
		dialTimeout:    10 * time.Second,
		requestTimeout: 30 * time.Second,
		metadataMaxAge: 5 * time.Minute,
	}
}

// WithSeedBrokers sets the host:port addresses the client first asks for metadata.
// Default: 127.0.0.1:9092.
func WithSeedBrokers(addresses ...string) Option {
	return func(c *clientConfig) { c.seeds = append([]string(nil), addresses...) }
}

// WithClientID sets the client id sent in every request header. Default: "sluice-client".
func WithClientID(id string) Option { return func(c *clientConfig) { c.clientID = id } }

// WithDialTimeout bounds connecting to a broker (TCP and the ApiVersions handshake).
// Default: 10 s.
func WithDialTimeout(d time.Duration) Option { return func(c *clientConfig) { c.dialTimeout = d } }

// WithRequestTimeout bounds the wait for one response, on top of any wait the request itself asks
// the broker for (a fetch's max wait, a produce's acks timeout). A connection whose response is
// this late is closed and its requests fail with ErrNetwork. Default: 30 s.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *clientConfig) { c.requestTimeout = d }
}

// WithMetadataMaxAge sets how often cached metadata is refreshed when nothing forces it sooner.
// Default: 5 min.
func WithMetadataMaxAge(d time.Duration) Option {
	return func(c *clientConfig) { c.metadataMaxAge = d }
}

// WithAutoTopicCreation lets metadata requests create unknown topics, where the broker allows it.
// Default: false (topics are created with Admin.CreateTopics).
func WithAutoTopicCreation(allow bool) Option {
	return func(c *clientConfig) { c.allowAutoTopicCreation = allow }
}

// Acks is how many replicas must have a batch before the broker answers a produce.
type Acks int16

const (
	// AcksNone (0): the broker answers nothing; records count as delivered once written to the socket.
	AcksNone Acks = 0
	// AcksLeader (1): the leader has appended the batch.
	AcksLeader Acks = 1
	// AcksAll (-1): every in-sync replica has the batch (sluice: fdatasynced).
	AcksAll Acks = -1
)

// Compression is the codec a producer compresses batches with.
type Compression int8

const (
	CompressionNone Compression = 0
	CompressionZstd Compression = 4
)

// Idempotence chooses whether the producer asks for a producer id.
type Idempotence int8

const (
	// IdempotenceAuto uses a producer id when the broker serves InitProducerId and goes without
	// otherwise.
	IdempotenceAuto Idempotence = iota
	// IdempotenceOff never asks for a producer id.
	IdempotenceOff
	// IdempotenceRequired fails NewProducer if the broker offers no producer id.
	IdempotenceRequired
)

// ProducerOption configures a Producer.
type ProducerOption func(*producerConfig)

type producerConfig struct {
	acks                 Acks
	linger               time.Duration
	batchMaxBytes        int
	maxBufferedBytes     int64
	bufferFullError      bool
	maxInFlightPerBroker int
	compression          Compression
	partitioner          Partitioner
	maxRetries           int
	retryBackoff         time.Duration
	maxRetryBackoff      time.Duration
	deliveryTimeout      time.Duration
	ackTimeout           time.Duration
	idempotence          Idempotence
	transactionalID      string        // txn_producer.go; "" without transactions
	transactionTimeout   time.Duration // transaction.timeout.ms
}

func defaultProducerConfig() producerConfig {
	return producerConfig{
		acks:                 AcksAll,
		linger:               5 * time.Millisecond,
		batchMaxBytes:        1 << 20,
		maxBufferedBytes:     64 << 20,
		maxInFlightPerBroker: 5,
		compression:          CompressionNone,
		partitioner:          KeyHashPartitioner(),
		maxRetries:           math.MaxInt,
		retryBackoff:         100 * time.Millisecond,
		maxRetryBackoff:      time.Second,
		deliveryTimeout:      2 * time.Minute,
		ackTimeout:           30 * time.Second,
		idempotence:          IdempotenceAuto,
		transactionTimeout:   time.Minute,
	}
}

// WithAcks sets the acknowledgement level. Default: AcksAll.
func WithAcks(acks Acks) ProducerOption { return func(c *producerConfig) { c.acks = acks } }

// WithLinger sets how long a partition's batch may wait for more records before it is sent. A batch
// that reaches the maximum size goes at once. The sender takes batches up to a millisecond (at most
// half the linger) before their linger ends, because its timer fires up to a millisecond late.
// Default: 5 ms.
func WithLinger(d time.Duration) ProducerOption { return func(c *producerConfig) { c.linger = d } }

// WithBatchMaxBytes sets the largest batch, in encoded (uncompressed) bytes; it must not exceed the
// topic's max.message.bytes. A single record larger than this is refused with ErrRecordTooLarge.
// Default: 1 MiB.
func WithBatchMaxBytes(n int) ProducerOption { return func(c *producerConfig) { c.batchMaxBytes = n } }

// WithMaxBufferedBytes bounds the bytes of records accepted but not yet acknowledged. When the bound
// is reached, Produce blocks until room frees or its context ends (or, with WithBufferFullError,
// fails at once). Default: 64 MiB.
func WithMaxBufferedBytes(n int64) ProducerOption {
	return func(c *producerConfig) { c.maxBufferedBytes = n }
}

// WithBufferFullError makes Produce return ErrBufferFull instead of blocking when the buffer is
// full. Default: off (Produce blocks).
func WithBufferFullError() ProducerOption {
	return func(c *producerConfig) { c.bufferFullError = true }
}

// WithMaxInFlightPerBroker bounds the produce requests awaiting an answer from one broker. Each
// partition has at most one batch in flight whatever this says, which is what keeps a partition's
// records in order across retries. Default: 5.
func WithMaxInFlightPerBroker(n int) ProducerOption {
	return func(c *producerConfig) { c.maxInFlightPerBroker = n }
}

// WithCompression sets the batch codec. Default: CompressionNone.
func WithCompression(codec Compression) ProducerOption {
	return func(c *producerConfig) { c.compression = codec }
}

// WithPartitioner replaces the partitioner. Default: KeyHashPartitioner (murmur2 of the key as the
// Java client computes it; sticky for keyless records).
func WithPartitioner(p Partitioner) ProducerOption {
	return func(c *producerConfig) { c.partitioner = p }
}

// WithMaxRetries bounds how often one batch is retried after a retriable error; the delivery
// timeout bounds it as well. Default: unlimited (only the delivery timeout stops retries).
func WithMaxRetries(n int) ProducerOption { return func(c *producerConfig) { c.maxRetries = n } }

// WithRetryBackoff sets the wait before the first retry of a batch; it doubles with each further
// retry up to max. Default: 100 ms, doubling up to 1 s.
func WithRetryBackoff(first, max time.Duration) ProducerOption {
	return func(c *producerConfig) { c.retryBackoff, c.maxRetryBackoff = first, max }
}

// WithDeliveryTimeout bounds the time from Produce to the record's acknowledgement; a record not
// delivered by then fails with ErrDeliveryTimeout. Default: 2 min.
func WithDeliveryTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.deliveryTimeout = d }
}

// WithAckTimeout sets the timeout a produce request asks the broker to wait for replicas (acks=all).
// Default: 30 s.
func WithAckTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.ackTimeout = d }
}

// WithTransactionalID makes the producer transactional (txn_producer.go): records are produced
// between BeginTransaction and CommitTransaction or AbortTransaction, and read_committed
// consumers see them only once committed. It implies acks=all and idempotence. A new producer with
// the same id fences the previous one (ErrProducerFenced).
func WithTransactionalID(id string) ProducerOption {
	return func(c *producerConfig) { c.transactionalID = id }
}

// WithTransactionTimeout sets transaction.timeout.ms: the coordinator aborts a transaction open
// longer. Default: 60 s.
func WithTransactionTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.transactionTimeout = d }
}

// WithIdempotence chooses whether to use a producer id. Default: IdempotenceAuto.
func WithIdempotence(mode Idempotence) ProducerOption {
	return func(c *producerConfig) { c.idempotence = mode }
}

// ConsumerOption configures a Consumer.
type ConsumerOption func(*consumerConfig)

type consumerConfig struct {
	fetchMaxWait           time.Duration
	fetchMinBytes          int32
	fetchMaxBytes          int32
	fetchMaxPartitionBytes int32
	maxBufferedBytes       int64
	readCommitted          bool
}

func defaultConsumerConfig() consumerConfig {
	return consumerConfig{
		fetchMaxWait:           500 * time.Millisecond,
		fetchMinBytes:          1,
		fetchMaxBytes:          50 << 20,
		fetchMaxPartitionBytes: 1 << 20,
		maxBufferedBytes:       64 << 20,
	}
}

// WithFetchMaxWait sets how long the broker may hold a fetch waiting for FetchMinBytes.
// Default: 500 ms.
func WithFetchMaxWait(d time.Duration) ConsumerOption {
	return func(c *consumerConfig) { c.fetchMaxWait = d }
}

// WithFetchMinBytes sets the bytes a fetch waits for before the broker answers. Default: 1.
func WithFetchMinBytes(n int32) ConsumerOption {
	return func(c *consumerConfig) { c.fetchMinBytes = n }
}

// WithFetchMaxBytes bounds one fetch response. Default: 50 MiB.
func WithFetchMaxBytes(n int32) ConsumerOption {
	return func(c *consumerConfig) { c.fetchMaxBytes = n }
}

// WithFetchMaxPartitionBytes bounds one partition's share of a fetch response (the broker still
// sends at least one whole batch). Default: 1 MiB.
func WithFetchMaxPartitionBytes(n int32) ConsumerOption {
	return func(c *consumerConfig) { c.fetchMaxPartitionBytes = n }
}

// WithConsumerBufferBytes bounds the fetched bytes held for Poll: the consumer fetches ahead while
// less than this is buffered. Default: 64 MiB.
func WithConsumerBufferBytes(n int64) ConsumerOption {
	return func(c *consumerConfig) { c.maxBufferedBytes = n }
}

// WithReadCommitted makes fetches stop at the last stable offset. Default: read uncommitted.
func WithReadCommitted() ConsumerOption { return func(c *consumerConfig) { c.readCommitted = true } }
