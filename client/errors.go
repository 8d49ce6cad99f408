package client

import (
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/protocol"
)

// Error classes. Every error this package returns either wraps one of them (errors.Is) or is a
// *KafkaError (errors.As), or is the caller's context error.
var (
	// ErrClosed: the client, producer or consumer was closed.
	ErrClosed = errors.New("client: closed")
	// ErrBufferFull: the producer's buffer is full and WithBufferFullError was chosen.
	ErrBufferFull = errors.New("client: producer buffer full")
	// ErrRecordTooLarge: a record cannot fit in a batch of the configured maximum size.
	ErrRecordTooLarge = errors.New("client: record too large")
	// ErrDeliveryTimeout: a record was not acknowledged within the delivery timeout.
	ErrDeliveryTimeout = errors.New("client: delivery timeout")
	// ErrRetriesExhausted: a record failed more times than the retry limit allows.
	ErrRetriesExhausted = errors.New("client: retries exhausted")
	// ErrUnsupported: the broker does not serve an API (or version) the call needs.
	ErrUnsupported = errors.New("client: unsupported by broker")
	// ErrUnknownTopic: the topic does not exist (metadata named it with no partitions).
	ErrUnknownTopic = errors.New("client: unknown topic")
	// ErrNotAssigned: the consumer has no assignment for the partition named.
	ErrNotAssigned = errors.New("client: partition not assigned")
	// ErrNotMember: a group commit was asked for before the member joined (or after it left).
	ErrNotMember = errors.New("client: not a group member")
	// ErrProducerFenced: a newer producer with the same transactional id took over (or the
	// coordinator fenced this one); the producer can do nothing more and must be closed.
	ErrProducerFenced = errors.New("client: producer fenced")
	// ErrNoTransaction: a transactional producer was asked to produce or end outside a
	// transaction, or to begin one while one is open.
	ErrNoTransaction = errors.New("client: no transaction open")
	// ErrMalformed: the broker sent bytes this client cannot decode (a corrupt or unknown batch).
	ErrMalformed = errors.New("client: malformed response")
)

// KafkaError is an error code a broker answered, with where it applied. Retrieve it with errors.As;
// it unwraps to the protocol.ErrorCode value, so errors.Is(err, protocol.NotLeaderOrFollower) works too.
type KafkaError struct {
	Code      int16
	Name      string // Kafka's name for Code; empty for a code sluice's table lacks
	Retriable bool   // whether Kafka classes the code as retriable
	Op        string // the request that failed, e.g. "produce", "create topics"
	Topic     string // empty when the error is not about one topic
	Partition int32  // -1 when the error is not about one partition
	Message   string // the broker's error message, when the response carries one
}

// newKafkaError builds a KafkaError for code (which must not be 0).
func newKafkaError(op, topic string, partition int32, code int16, message *string) *KafkaError {
	ec := protocol.ErrorCodeOf(code)
	e := &KafkaError{Code: code, Name: ec.Name, Retriable: ec.Retriable, Op: op, Topic: topic, Partition: partition}
	if message != nil {
		e.Message = *message
	}
	return e
}

// errorForCode returns nil for code 0 and a *KafkaError otherwise.
func errorForCode(op, topic string, partition int32, code int16, message *string) error {
	if code == 0 {
		return nil
	}
	return newKafkaError(op, topic, partition, code, message)
}

// Error implements error.
func (e *KafkaError) Error() string {
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("code %d", e.Code)
	}
	where := ""
	switch {
	case e.Topic != "" && e.Partition >= 0:
		where = fmt.Sprintf(" %s-%d", e.Topic, e.Partition)
	case e.Topic != "":
		where = " " + e.Topic
	}
	text := fmt.Sprintf("client: %s%s: kafka error %s (%d)", e.Op, where, name, e.Code)
	if e.Message != "" {
		text += ": " + e.Message
	}
	return text
}

// Unwrap returns the protocol.ErrorCode value of Code.
func (e *KafkaError) Unwrap() error { return protocol.ErrorCodeOf(e.Code) }

// IsRetriable reports whether err is worth retrying unchanged: a retriable Kafka error code, or a
// network error (connection refused, reset, timed out), which errors.Is(err, ErrNetwork) identifies.
func IsRetriable(err error) bool {
	var kafkaError *KafkaError
	if errors.As(err, &kafkaError) {
		return kafkaError.Retriable
	}
	return errors.Is(err, ErrNetwork)
}

// ErrNetwork wraps every connection failure: dial errors, resets, timeouts and closed connections.
var ErrNetwork = errors.New("client: network")

// networkError marks cause as a connection failure talking to address.
func networkError(address string, cause error) error {
	return fmt.Errorf("%w: %s: %w", ErrNetwork, address, cause)
}
