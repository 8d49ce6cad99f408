package protocol_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/protocol"
)

// TestErrorCodesMatchKerr checks every code's number, name and retriable flag against franz-go's kerr,
// which records Kafka's Errors enum. Kafka renamed code 6; kerr keeps the old name.
func TestErrorCodesMatchKerr(t *testing.T) {
	renamed := map[string]string{"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION"}
	for code := int16(-1); code <= 136; code++ {
		ours := protocol.ErrorCodeOf(code)
		if ours.Code != code || ours.Name == "" {
			t.Errorf("ErrorCodeOf(%d) = %+v, want a named code %d", code, ours, code)
			continue
		}
		if code == 0 {
			if ours != protocol.None || ours.Retriable {
				t.Errorf("ErrorCodeOf(0) = %+v, want NONE", ours)
			}
			continue
		}
		theirs, ok := kerr.ErrorForCode(code).(*kerr.Error)
		if !ok {
			t.Errorf("kerr has no error for code %d", code)
			continue
		}
		wantName := theirs.Message
		if old, ok := renamed[ours.Name]; ok && old == theirs.Message {
			wantName = ours.Name
		}
		if ours.Name != wantName || ours.Retriable != theirs.Retriable {
			t.Errorf("code %d: ours %s retriable=%v, kerr %s retriable=%v", code, ours.Name, ours.Retriable, theirs.Message, theirs.Retriable)
		}
	}
}

func TestNamedErrorCodes(t *testing.T) {
	check := func(named protocol.ErrorCode, code int16, name string, retriable bool) {
		t.Helper()
		if named != (protocol.ErrorCode{Code: code, Name: name, Retriable: retriable}) {
			t.Errorf("%s = %+v, want code %d retriable %v", name, named, code, retriable)
		}
		if protocol.ErrorCodeOf(code) != named {
			t.Errorf("ErrorCodeOf(%d) = %+v, want %+v", code, protocol.ErrorCodeOf(code), named)
		}
	}
	check(protocol.UnknownServerError, -1, "UNKNOWN_SERVER_ERROR", false)
	check(protocol.None, 0, "NONE", false)
	check(protocol.OffsetOutOfRange, 1, "OFFSET_OUT_OF_RANGE", false)
	check(protocol.CorruptMessage, 2, "CORRUPT_MESSAGE", true)
	check(protocol.UnknownTopicOrPartition, 3, "UNKNOWN_TOPIC_OR_PARTITION", true)
	check(protocol.NotLeaderOrFollower, 6, "NOT_LEADER_OR_FOLLOWER", true)
	check(protocol.MessageTooLarge, 10, "MESSAGE_TOO_LARGE", false)
	check(protocol.NotCoordinator, 16, "NOT_COORDINATOR", true)
	check(protocol.RebalanceInProgress, 27, "REBALANCE_IN_PROGRESS", false)
	check(protocol.UnsupportedVersion, 35, "UNSUPPORTED_VERSION", false)
	check(protocol.InvalidRequest, 42, "INVALID_REQUEST", false)
	check(protocol.InvalidProducerIDMapping, 49, "INVALID_PRODUCER_ID_MAPPING", false)
	check(protocol.KafkaStorageError, 56, "KAFKA_STORAGE_ERROR", true)
	check(protocol.FetchSessionIDNotFound, 70, "FETCH_SESSION_ID_NOT_FOUND", true)
	check(protocol.MemberIDRequired, 79, "MEMBER_ID_REQUIRED", false)
	check(protocol.FencedInstanceID, 82, "FENCED_INSTANCE_ID", false)
	check(protocol.InvalidRecord, 87, "INVALID_RECORD", false)
	check(protocol.UnstableOffsetCommit, 88, "UNSTABLE_OFFSET_COMMIT", true)
	check(protocol.ThrottlingQuotaExceeded, 89, "THROTTLING_QUOTA_EXCEEDED", true)
	check(protocol.UnknownTopicID, 100, "UNKNOWN_TOPIC_ID", true)
	check(protocol.InconsistentTopicID, 103, "INCONSISTENT_TOPIC_ID", true)
}

func TestErrorCodeOfUnknownNumber(t *testing.T) {
	for _, code := range []int16{-2, 137, 999, -32768, 32767} {
		got := protocol.ErrorCodeOf(code)
		if got != (protocol.ErrorCode{Code: code}) {
			t.Errorf("ErrorCodeOf(%d) = %+v, want only the code", code, got)
		}
		if got.Error() == "" {
			t.Errorf("ErrorCodeOf(%d).Error() is empty", code)
		}
	}
}

func TestCodeFor(t *testing.T) {
	check := func(err error, want int16) {
		t.Helper()
		if got := protocol.CodeFor(err); got != want {
			t.Errorf("CodeFor(%v) = %d, want %d", err, got, want)
		}
	}
	check(nil, 0)
	check(io.EOF, -1)
	check(protocol.NotCoordinator, 16)
	wrapped := fmt.Errorf("broker: topic %q: %w", "orders", protocol.UnknownTopicOrPartition)
	check(wrapped, 3)
	check(fmt.Errorf("broker: produce: %w", wrapped), 3)
	check(errors.Join(io.EOF, fmt.Errorf("segment: %w", protocol.KafkaStorageError)), 56)
	check(fmt.Errorf("two causes: %w, %w", io.ErrUnexpectedEOF, protocol.CorruptMessage), 2)
	check(fmt.Errorf("no code: %v", protocol.CorruptMessage), -1) // %v drops the chain
	check(protocol.ErrorCodeOf(500), 500)

	if !errors.Is(wrapped, protocol.UnknownTopicOrPartition) || errors.Is(wrapped, protocol.NotCoordinator) {
		t.Errorf("errors.Is does not tell error codes apart through %%w")
	}
	if got := wrapped.Error(); got != `broker: topic "orders": kafka error UNKNOWN_TOPIC_OR_PARTITION (3)` {
		t.Errorf("wrapped message = %q", got)
	}
}
