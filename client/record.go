package client

import "time"

// Record is one Kafka record, produced or consumed.
//
// A producer reads Topic, Key, Value, Headers and Timestamp, and fills in Partition when it accepts
// the record, Timestamp when it was zero, and Offset when the broker acknowledges it (-1 with
// AcksNone). The caller must not modify a record between Produce and its callback.
//
// A consumer returns records whose Key, Value and header values share memory with the fetched
// response; they stay valid as long as the caller holds them.
type Record struct {
	Topic     string
	Partition int32
	Key       []byte // nil is Kafka's null key (partitioned sticky, not hashed)
	Value     []byte
	Headers   []Header
	Timestamp time.Time
	Offset    int64
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}
