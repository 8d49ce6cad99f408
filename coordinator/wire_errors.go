package coordinator

import (
	"errors"
)

// wireError carries an error across a forwarded call: the class as a stable
// code and the controller's full message.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorClass pairs an error class with its code on the wire. Codes are part
// of the forwarding protocol: never reuse or rename one.
type errorClass struct {
	code  string
	class error
}

// errorClasses lists every class that survives forwarding, most specific
// first (an error is encoded with the first class it wraps).
func errorClasses() []errorClass {
	return []errorClass{
		{"topic-exists", ErrTopicExists},
		{"unknown-topic", ErrUnknownTopic},
		{"invalid-topic-name", ErrInvalidTopicName},
		{"reserved-topic", ErrReservedTopic},
		{"invalid-partitions", ErrInvalidPartitions},
		{"invalid-replication-factor", ErrInvalidReplicationFactor},
		{"invalid-config", ErrInvalidConfig},
		{"invalid-broker", ErrInvalidBroker},
		{"cluster-mismatch", ErrClusterMismatch},
		{"producer-ids-exhausted", ErrProducerIDsExhausted},
		{"stale-partition-epoch", ErrStalePartitionEpoch},
		{"invalid-isr", ErrInvalidISR},
		{"preferred-leader-not-available", ErrPreferredLeaderNotAvailable},
		{"election-not-needed", ErrElectionNotNeeded},
		{"eligible-leaders-not-available", ErrEligibleLeadersNotAvailable},
		{"malformed-command", errMalformedCommand},
		{"not-leader", ErrNotLeader},
		{"timeout", ErrTimeout},
		// The controller is closing: to the caller that is a controller
		// change, so it decodes as not-leader (retriable).
		{"closed", ErrNotLeader},
	}
}

// encodeWireError returns err's wire form; an error of no listed class gets
// an empty code.
func encodeWireError(err error) *wireError {
	wire := &wireError{Message: err.Error()}
	if errors.Is(err, ErrClosed) {
		wire.Code = "closed"
		return wire
	}
	for _, class := range errorClasses() {
		if errors.Is(err, class.class) {
			wire.Code = class.code
			break
		}
	}
	return wire
}

// decode returns an error with the controller's message that errors.Is
// matches against its class.
func (w *wireError) decode() error {
	for _, class := range errorClasses() {
		if class.code == w.Code {
			return &remoteError{class: class.class, message: w.Message}
		}
	}
	return &remoteError{message: w.Message}
}

// remoteError is an error returned by the controller.
type remoteError struct {
	class   error // nil for an error of no listed class
	message string
}

func (e *remoteError) Error() string { return e.message }

func (e *remoteError) Unwrap() error { return e.class }
