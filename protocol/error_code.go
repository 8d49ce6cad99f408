package protocol

import (
	"errors"
	"fmt"
)

// ErrorCode is one Kafka error code: the number on the wire, Kafka's name for it, and whether a client
// may retry the same request unchanged (Kafka's RetriableException hierarchy).
//
// ErrorCode is a comparable value that implements error, so a handler can return or wrap one
// (fmt.Errorf("broker: topic %q: %w", name, protocol.UnknownTopicOrPartition)) and the code that writes
// the response recovers the number with CodeFor. errors.Is(err, protocol.NotCoordinator) works too.
type ErrorCode struct {
	Code      int16
	Name      string // Kafka's name, e.g. "UNKNOWN_TOPIC_OR_PARTITION"; empty for a code this table lacks.
	Retriable bool
}

// Error implements error.
func (e ErrorCode) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("kafka error code %d", e.Code)
	}
	return fmt.Sprintf("kafka error %s (%d)", e.Name, e.Code)
}

// ErrorCodeOf returns the ErrorCode with the given number. A number this table lacks comes back with
// that Code, an empty Name and Retriable false.
func ErrorCodeOf(code int16) ErrorCode {
	index := int(code) + 1 // the table starts at UNKNOWN_SERVER_ERROR, -1
	if index < 0 || index >= len(errorCodesByNumber) {
		return ErrorCode{Code: code}
	}
	return errorCodesByNumber[index]
}

// CodeFor returns the Kafka error code to answer for err: 0 (NONE) for nil, the Code of the first
// ErrorCode in err's chain (errors.As), and -1 (UNKNOWN_SERVER_ERROR) for any other error.
func CodeFor(err error) int16 {
	if err == nil {
		return None.Code
	}
	var code ErrorCode
	if errors.As(err, &code) {
		return code.Code
	}
	return UnknownServerError.Code
}

// Kafka's error codes, numbered as in Kafka's Errors enum. Names follow current Kafka (code 6 is
// NOT_LEADER_OR_FOLLOWER, once NOT_LEADER_FOR_PARTITION). Retriable flags follow Kafka's exception
// classes as recorded by franz-go's kerr; the test checks every number and flag against kerr.
//
// The broker answers only some of these; the rest are here so that ErrorCodeOf can name any code a
// peer sends back (replication, tests).
var (
	UnknownServerError                     = ErrorCode{-1, "UNKNOWN_SERVER_ERROR", false}
	None                                   = ErrorCode{0, "NONE", false}
	OffsetOutOfRange                       = ErrorCode{1, "OFFSET_OUT_OF_RANGE", false}
	CorruptMessage                         = ErrorCode{2, "CORRUPT_MESSAGE", true}
	UnknownTopicOrPartition                = ErrorCode{3, "UNKNOWN_TOPIC_OR_PARTITION", true}
	InvalidFetchSize                       = ErrorCode{4, "INVALID_FETCH_SIZE", false}
	LeaderNotAvailable                     = ErrorCode{5, "LEADER_NOT_AVAILABLE", true}
	NotLeaderOrFollower                    = ErrorCode{6, "NOT_LEADER_OR_FOLLOWER", true}
	RequestTimedOut                        = ErrorCode{7, "REQUEST_TIMED_OUT", true}
	BrokerNotAvailable                     = ErrorCode{8, "BROKER_NOT_AVAILABLE", true}
	ReplicaNotAvailable                    = ErrorCode{9, "REPLICA_NOT_AVAILABLE", true}
	MessageTooLarge                        = ErrorCode{10, "MESSAGE_TOO_LARGE", false}
	StaleControllerEpoch                   = ErrorCode{11, "STALE_CONTROLLER_EPOCH", false}
	OffsetMetadataTooLarge                 = ErrorCode{12, "OFFSET_METADATA_TOO_LARGE", false}
	NetworkException                       = ErrorCode{13, "NETWORK_EXCEPTION", true}
	CoordinatorLoadInProgress              = ErrorCode{14, "COORDINATOR_LOAD_IN_PROGRESS", true}
	CoordinatorNotAvailable                = ErrorCode{15, "COORDINATOR_NOT_AVAILABLE", true}
	NotCoordinator                         = ErrorCode{16, "NOT_COORDINATOR", true}
	InvalidTopicException                  = ErrorCode{17, "INVALID_TOPIC_EXCEPTION", false}
	RecordListTooLarge                     = ErrorCode{18, "RECORD_LIST_TOO_LARGE", false}
	NotEnoughReplicas                      = ErrorCode{19, "NOT_ENOUGH_REPLICAS", true}
	NotEnoughReplicasAfterAppend           = ErrorCode{20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true}
	InvalidRequiredAcks                    = ErrorCode{21, "INVALID_REQUIRED_ACKS", false}
	IllegalGeneration                      = ErrorCode{22, "ILLEGAL_GENERATION", false}
	InconsistentGroupProtocol              = ErrorCode{23, "INCONSISTENT_GROUP_PROTOCOL", false}
	InvalidGroupID                         = ErrorCode{24, "INVALID_GROUP_ID", false}
	UnknownMemberID                        = ErrorCode{25, "UNKNOWN_MEMBER_ID", false}
	InvalidSessionTimeout                  = ErrorCode{26, "INVALID_SESSION_TIMEOUT", false}
	RebalanceInProgress                    = ErrorCode{27, "REBALANCE_IN_PROGRESS", false}
	InvalidCommitOffsetSize                = ErrorCode{28, "INVALID_COMMIT_OFFSET_SIZE", false}
	TopicAuthorizationFailed               = ErrorCode{29, "TOPIC_AUTHORIZATION_FAILED", false}
	GroupAuthorizationFailed               = ErrorCode{30, "GROUP_AUTHORIZATION_FAILED", false}
	ClusterAuthorizationFailed             = ErrorCode{31, "CLUSTER_AUTHORIZATION_FAILED", false}
	InvalidTimestamp                       = ErrorCode{32, "INVALID_TIMESTAMP", false}
	UnsupportedSASLMechanism               = ErrorCode{33, "UNSUPPORTED_SASL_MECHANISM", false}
	IllegalSASLState                       = ErrorCode{34, "ILLEGAL_SASL_STATE", false}
	UnsupportedVersion                     = ErrorCode{35, "UNSUPPORTED_VERSION", false}
	TopicAlreadyExists                     = ErrorCode{36, "TOPIC_ALREADY_EXISTS", false}
	InvalidPartitions                      = ErrorCode{37, "INVALID_PARTITIONS", false}
	InvalidReplicationFactor               = ErrorCode{38, "INVALID_REPLICATION_FACTOR", false}
	InvalidReplicaAssignment               = ErrorCode{39, "INVALID_REPLICA_ASSIGNMENT", false}
	InvalidConfig                          = ErrorCode{40, "INVALID_CONFIG", false}
	NotController                          = ErrorCode{41, "NOT_CONTROLLER", true}
	InvalidRequest                         = ErrorCode{42, "INVALID_REQUEST", false}
	UnsupportedForMessageFormat            = ErrorCode{43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", false}
	PolicyViolation                        = ErrorCode{44, "POLICY_VIOLATION", false}
	OutOfOrderSequenceNumber               = ErrorCode{45, "OUT_OF_ORDER_SEQUENCE_NUMBER", false}
	DuplicateSequenceNumber                = ErrorCode{46, "DUPLICATE_SEQUENCE_NUMBER", false}
	InvalidProducerEpoch                   = ErrorCode{47, "INVALID_PRODUCER_EPOCH", false}
	InvalidTxnState                        = ErrorCode{48, "INVALID_TXN_STATE", false}
	InvalidProducerIDMapping               = ErrorCode{49, "INVALID_PRODUCER_ID_MAPPING", false}
	InvalidTransactionTimeout              = ErrorCode{50, "INVALID_TRANSACTION_TIMEOUT", false}
	ConcurrentTransactions                 = ErrorCode{51, "CONCURRENT_TRANSACTIONS", false}
	TransactionCoordinatorFenced           = ErrorCode{52, "TRANSACTION_COORDINATOR_FENCED", false}
	TransactionalIDAuthorizationFailed     = ErrorCode{53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false}
	SecurityDisabled                       = ErrorCode{54, "SECURITY_DISABLED", false}
	OperationNotAttempted                  = ErrorCode{55, "OPERATION_NOT_ATTEMPTED", false}
	KafkaStorageError                      = ErrorCode{56, "KAFKA_STORAGE_ERROR", true}
	LogDirNotFound                         = ErrorCode{57, "LOG_DIR_NOT_FOUND", false}
	SASLAuthenticationFailed               = ErrorCode{58, "SASL_AUTHENTICATION_FAILED", false}
	UnknownProducerID                      = ErrorCode{59, "UNKNOWN_PRODUCER_ID", false}
	ReassignmentInProgress                 = ErrorCode{60, "REASSIGNMENT_IN_PROGRESS", false}
	DelegationTokenAuthDisabled            = ErrorCode{61, "DELEGATION_TOKEN_AUTH_DISABLED", false}
	DelegationTokenNotFound                = ErrorCode{62, "DELEGATION_TOKEN_NOT_FOUND", false}
	DelegationTokenOwnerMismatch           = ErrorCode{63, "DELEGATION_TOKEN_OWNER_MISMATCH", false}
	DelegationTokenRequestNotAllowed       = ErrorCode{64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", false}
	DelegationTokenAuthorizationFailed     = ErrorCode{65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", false}
	DelegationTokenExpired                 = ErrorCode{66, "DELEGATION_TOKEN_EXPIRED", false}
	InvalidPrincipalType                   = ErrorCode{67, "INVALID_PRINCIPAL_TYPE", false}
	NonEmptyGroup                          = ErrorCode{68, "NON_EMPTY_GROUP", false}
	GroupIDNotFound                        = ErrorCode{69, "GROUP_ID_NOT_FOUND", false}
	FetchSessionIDNotFound                 = ErrorCode{70, "FETCH_SESSION_ID_NOT_FOUND", true}
	InvalidFetchSessionEpoch               = ErrorCode{71, "INVALID_FETCH_SESSION_EPOCH", true}
	ListenerNotFound                       = ErrorCode{72, "LISTENER_NOT_FOUND", true}
	TopicDeletionDisabled                  = ErrorCode{73, "TOPIC_DELETION_DISABLED", false}
	FencedLeaderEpoch                      = ErrorCode{74, "FENCED_LEADER_EPOCH", true}
	UnknownLeaderEpoch                     = ErrorCode{75, "UNKNOWN_LEADER_EPOCH", true}
	UnsupportedCompressionType             = ErrorCode{76, "UNSUPPORTED_COMPRESSION_TYPE", false}
	StaleBrokerEpoch                       = ErrorCode{77, "STALE_BROKER_EPOCH", false}
	OffsetNotAvailable                     = ErrorCode{78, "OFFSET_NOT_AVAILABLE", true}
	MemberIDRequired                       = ErrorCode{79, "MEMBER_ID_REQUIRED", false}
	PreferredLeaderNotAvailable            = ErrorCode{80, "PREFERRED_LEADER_NOT_AVAILABLE", true}
	GroupMaxSizeReached                    = ErrorCode{81, "GROUP_MAX_SIZE_REACHED", false}
	FencedInstanceID                       = ErrorCode{82, "FENCED_INSTANCE_ID", false}
	EligibleLeadersNotAvailable            = ErrorCode{83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", true}
	ElectionNotNeeded                      = ErrorCode{84, "ELECTION_NOT_NEEDED", true}
	NoReassignmentInProgress               = ErrorCode{85, "NO_REASSIGNMENT_IN_PROGRESS", false}
	GroupSubscribedToTopic                 = ErrorCode{86, "GROUP_SUBSCRIBED_TO_TOPIC", false}
	InvalidRecord                          = ErrorCode{87, "INVALID_RECORD", false}
	UnstableOffsetCommit                   = ErrorCode{88, "UNSTABLE_OFFSET_COMMIT", true}
	ThrottlingQuotaExceeded                = ErrorCode{89, "THROTTLING_QUOTA_EXCEEDED", true}
	ProducerFenced                         = ErrorCode{90, "PRODUCER_FENCED", false}
	ResourceNotFound                       = ErrorCode{91, "RESOURCE_NOT_FOUND", false}
	DuplicateResource                      = ErrorCode{92, "DUPLICATE_RESOURCE", false}
	UnacceptableCredential                 = ErrorCode{93, "UNACCEPTABLE_CREDENTIAL", false}
	InconsistentVoterSet                   = ErrorCode{94, "INCONSISTENT_VOTER_SET", false}
	InvalidUpdateVersion                   = ErrorCode{95, "INVALID_UPDATE_VERSION", false}
	FeatureUpdateFailed                    = ErrorCode{96, "FEATURE_UPDATE_FAILED", false}
	PrincipalDeserializationFailure        = ErrorCode{97, "PRINCIPAL_DESERIALIZATION_FAILURE", false}
	SnapshotNotFound                       = ErrorCode{98, "SNAPSHOT_NOT_FOUND", false}
	PositionOutOfRange                     = ErrorCode{99, "POSITION_OUT_OF_RANGE", false}
	UnknownTopicID                         = ErrorCode{100, "UNKNOWN_TOPIC_ID", true}
	DuplicateBrokerRegistration            = ErrorCode{101, "DUPLICATE_BROKER_REGISTRATION", false}
	BrokerIDNotRegistered                  = ErrorCode{102, "BROKER_ID_NOT_REGISTERED", false}
	InconsistentTopicID                    = ErrorCode{103, "INCONSISTENT_TOPIC_ID", true}
	InconsistentClusterID                  = ErrorCode{104, "INCONSISTENT_CLUSTER_ID", false}
	TransactionalIDNotFound                = ErrorCode{105, "TRANSACTIONAL_ID_NOT_FOUND", false}
	FetchSessionTopicIDError               = ErrorCode{106, "FETCH_SESSION_TOPIC_ID_ERROR", true}
	IneligibleReplica                      = ErrorCode{107, "INELIGIBLE_REPLICA", false}
	NewLeaderElected                       = ErrorCode{108, "NEW_LEADER_ELECTED", false}
	OffsetMovedToTieredStorage             = ErrorCode{109, "OFFSET_MOVED_TO_TIERED_STORAGE", false}
	FencedMemberEpoch                      = ErrorCode{110, "FENCED_MEMBER_EPOCH", false}
	UnreleasedInstanceID                   = ErrorCode{111, "UNRELEASED_INSTANCE_ID", false}
	UnsupportedAssignor                    = ErrorCode{112, "UNSUPPORTED_ASSIGNOR", false}
	StaleMemberEpoch                       = ErrorCode{113, "STALE_MEMBER_EPOCH", false}
	MismatchedEndpointType                 = ErrorCode{114, "MISMATCHED_ENDPOINT_TYPE", false}
	UnsupportedEndpointType                = ErrorCode{115, "UNSUPPORTED_ENDPOINT_TYPE", false}
	UnknownControllerID                    = ErrorCode{116, "UNKNOWN_CONTROLLER_ID", false}
	UnknownSubscriptionID                  = ErrorCode{117, "UNKNOWN_SUBSCRIPTION_ID", false}
	TelemetryTooLarge                      = ErrorCode{118, "TELEMETRY_TOO_LARGE", false}
	InvalidRegistration                    = ErrorCode{119, "INVALID_REGISTRATION", false}
	TransactionAbortable                   = ErrorCode{120, "TRANSACTION_ABORTABLE", false}
	InvalidRecordState                     = ErrorCode{121, "INVALID_RECORD_STATE", false}
	ShareSessionNotFound                   = ErrorCode{122, "SHARE_SESSION_NOT_FOUND", false}
	InvalidShareSessionEpoch               = ErrorCode{123, "INVALID_SHARE_SESSION_EPOCH", false}
	FencedStateEpoch                       = ErrorCode{124, "FENCED_STATE_EPOCH", false}
	InvalidVoterKey                        = ErrorCode{125, "INVALID_VOTER_KEY", false}
	DuplicateVoter                         = ErrorCode{126, "DUPLICATE_VOTER", false}
	VoterNotFound                          = ErrorCode{127, "VOTER_NOT_FOUND", false}
	InvalidRegularExpression               = ErrorCode{128, "INVALID_REGULAR_EXPRESSION", false}
	RebootstrapRequired                    = ErrorCode{129, "REBOOTSTRAP_REQUIRED", false}
	StreamsInvalidTopology                 = ErrorCode{130, "STREAMS_INVALID_TOPOLOGY", false}
	StreamsInvalidTopologyEpoch            = ErrorCode{131, "STREAMS_INVALID_TOPOLOGY_EPOCH", false}
	StreamsTopologyFenced                  = ErrorCode{132, "STREAMS_TOPOLOGY_FENCED", false}
	ShareSessionLimitReached               = ErrorCode{133, "SHARE_SESSION_LIMIT_REACHED", true}
	GroupDeletionFailed                    = ErrorCode{134, "GROUP_DELETION_FAILED", false}
	StreamsTopologyDescriptionUpdateFailed = ErrorCode{135, "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED", false}
	ControllerIDNotRegistered              = ErrorCode{136, "CONTROLLER_ID_NOT_REGISTERED", false}
)

// errorCodesByNumber holds every ErrorCode above at index Code+1.
// Invariant: errorCodesByNumber[i].Code == i-1 (checked by TestErrorCodeTableIsDense).
var errorCodesByNumber = [...]ErrorCode{
	UnknownServerError,
	None,
	OffsetOutOfRange,
	CorruptMessage,
	UnknownTopicOrPartition,
	InvalidFetchSize,
	LeaderNotAvailable,
	NotLeaderOrFollower,
	RequestTimedOut,
	BrokerNotAvailable,
	ReplicaNotAvailable,
	MessageTooLarge,
	StaleControllerEpoch,
	OffsetMetadataTooLarge,
	NetworkException,
	CoordinatorLoadInProgress,
	CoordinatorNotAvailable,
	NotCoordinator,
	InvalidTopicException,
	RecordListTooLarge,
	NotEnoughReplicas,
	NotEnoughReplicasAfterAppend,
	InvalidRequiredAcks,
	IllegalGeneration,
	InconsistentGroupProtocol,
	InvalidGroupID,
	UnknownMemberID,
	InvalidSessionTimeout,
	RebalanceInProgress,
	InvalidCommitOffsetSize,
	TopicAuthorizationFailed,
	GroupAuthorizationFailed,
	ClusterAuthorizationFailed,
	InvalidTimestamp,
	UnsupportedSASLMechanism,
	IllegalSASLState,
	UnsupportedVersion,
	TopicAlreadyExists,
	InvalidPartitions,
	InvalidReplicationFactor,
	InvalidReplicaAssignment,
	InvalidConfig,
	NotController,
	InvalidRequest,
	UnsupportedForMessageFormat,
	PolicyViolation,
	OutOfOrderSequenceNumber,
	DuplicateSequenceNumber,
	InvalidProducerEpoch,
	InvalidTxnState,
	InvalidProducerIDMapping,
	InvalidTransactionTimeout,
	ConcurrentTransactions,
	TransactionCoordinatorFenced,
	TransactionalIDAuthorizationFailed,
	SecurityDisabled,
	OperationNotAttempted,
	KafkaStorageError,
	LogDirNotFound,
	SASLAuthenticationFailed,
	UnknownProducerID,
	ReassignmentInProgress,
	DelegationTokenAuthDisabled,
	DelegationTokenNotFound,
	DelegationTokenOwnerMismatch,
	DelegationTokenRequestNotAllowed,
	DelegationTokenAuthorizationFailed,
	DelegationTokenExpired,
	InvalidPrincipalType,
	NonEmptyGroup,
	GroupIDNotFound,
	FetchSessionIDNotFound,
	InvalidFetchSessionEpoch,
	ListenerNotFound,
	TopicDeletionDisabled,
	FencedLeaderEpoch,
	UnknownLeaderEpoch,
	UnsupportedCompressionType,
	StaleBrokerEpoch,
	OffsetNotAvailable,
	MemberIDRequired,
	PreferredLeaderNotAvailable,
	GroupMaxSizeReached,
	FencedInstanceID,
	EligibleLeadersNotAvailable,
	ElectionNotNeeded,
	NoReassignmentInProgress,
	GroupSubscribedToTopic,
	InvalidRecord,
	UnstableOffsetCommit,
	ThrottlingQuotaExceeded,
	ProducerFenced,
	ResourceNotFound,
	DuplicateResource,
	UnacceptableCredential,
	InconsistentVoterSet,
	InvalidUpdateVersion,
	FeatureUpdateFailed,
	PrincipalDeserializationFailure,
	SnapshotNotFound,
	PositionOutOfRange,
	UnknownTopicID,
	DuplicateBrokerRegistration,
	BrokerIDNotRegistered,
	InconsistentTopicID,
	InconsistentClusterID,
	TransactionalIDNotFound,
	FetchSessionTopicIDError,
	IneligibleReplica,
	NewLeaderElected,
	OffsetMovedToTieredStorage,
	FencedMemberEpoch,
	UnreleasedInstanceID,
	UnsupportedAssignor,
	StaleMemberEpoch,
	MismatchedEndpointType,
	UnsupportedEndpointType,
	UnknownControllerID,
	UnknownSubscriptionID,
	TelemetryTooLarge,
	InvalidRegistration,
	TransactionAbortable,
	InvalidRecordState,
	ShareSessionNotFound,
	InvalidShareSessionEpoch,
	FencedStateEpoch,
	InvalidVoterKey,
	DuplicateVoter,
	VoterNotFound,
	InvalidRegularExpression,
	RebootstrapRequired,
	StreamsInvalidTopology,
	StreamsInvalidTopologyEpoch,
	StreamsTopologyFenced,
	ShareSessionLimitReached,
	GroupDeletionFailed,
	StreamsTopologyDescriptionUpdateFailed,
	ControllerIDNotRegistered,
}
