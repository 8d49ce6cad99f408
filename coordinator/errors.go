package coordinator

import "errors"

// Error classes returned by the Coordinator. Callers test them with
// errors.Is; the returned errors wrap them with the offending name or value.
// The comment on each class names the Kafka error code the broker answers
// with.
var (
	// ErrTopicExists: TOPIC_ALREADY_EXISTS (36).
	ErrTopicExists = errors.New("coordinator: topic already exists")
	// ErrUnknownTopic: UNKNOWN_TOPIC_OR_PARTITION (3).
	ErrUnknownTopic = errors.New("coordinator: unknown topic")
	// ErrInvalidTopicName: INVALID_TOPIC_EXCEPTION (17).
	ErrInvalidTopicName = errors.New("coordinator: invalid topic name")
	// ErrReservedTopic: INVALID_REQUEST (42). Users may not create, delete
	// or repartition internal topics such as __consumer_offsets; Kafka
	// answers "Creation of internal topic ... is prohibited" with this code.
	ErrReservedTopic = errors.New("coordinator: topic name is reserved for internal use")
	// ErrInvalidPartitions: INVALID_PARTITIONS (37).
	ErrInvalidPartitions = errors.New("coordinator: invalid partition count")
	// ErrInvalidReplicationFactor: INVALID_REPLICATION_FACTOR (38).
	ErrInvalidReplicationFactor = errors.New("coordinator: invalid replication factor")
	// ErrInvalidReplicaAssignment: INVALID_REPLICA_ASSIGNMENT (39). A manual
	// assignment with an empty or inconsistent replica list, a broker named
	// twice, an unregistered broker, or no live replica.
	ErrInvalidReplicaAssignment = errors.New("coordinator: invalid replica assignment")
	// ErrInvalidConfig: INVALID_CONFIG (40).
	ErrInvalidConfig = errors.New("coordinator: invalid topic config")
	// ErrInvalidBroker: INVALID_REQUEST (42); a broker registration with a
	// negative node id, an empty host or a port outside 1..65535.
	ErrInvalidBroker = errors.New("coordinator: invalid broker registration")
	// ErrNotLeader: NOT_CONTROLLER (41), retriable. This node is not the
	// Raft leader, or lost leadership before the change committed (in which
	// case the change may or may not have been applied).
	ErrNotLeader = errors.New("coordinator: not the controller")
	// ErrTimeout: REQUEST_TIMED_OUT (7), retriable. The change could not be
	// handed to Raft within Config.ApplyTimeout or the caller's deadline.
	ErrTimeout = errors.New("coordinator: timed out")
	// ErrCorruptLog: Open found the Raft log file (raft.db) damaged, for
	// example cut short; opening it would crash the process (SIGBUS).
	ErrCorruptLog = errors.New("coordinator: raft log file is damaged")
	// ErrStalePartitionEpoch: FENCED_LEADER_EPOCH (74), retriable. An ISR
	// change named a leader, leader epoch or partition epoch that is no
	// longer current; the leader re-reads the metadata and tries again.
	ErrStalePartitionEpoch = errors.New("coordinator: stale partition epoch")
	// ErrInvalidISR: INVALID_REQUEST (42). An ISR change without the leader,
	// with a non-replica, a duplicate, or a fenced broker joining.
	ErrInvalidISR = errors.New("coordinator: invalid ISR")
	// ErrPreferredLeaderNotAvailable: PREFERRED_LEADER_NOT_AVAILABLE (80).
	ErrPreferredLeaderNotAvailable = errors.New("coordinator: preferred leader not available")
	// ErrEligibleLeadersNotAvailable: ELIGIBLE_LEADERS_NOT_AVAILABLE (83). A
	// leader asked to resign and no other live replica is in sync.
	ErrEligibleLeadersNotAvailable = errors.New("coordinator: no eligible leader available")
	// ErrElectionNotNeeded: ELECTION_NOT_NEEDED (84).
	ErrElectionNotNeeded = errors.New("coordinator: election not needed")
	// ErrClosed: the Coordinator was closed.
	ErrClosed = errors.New("coordinator: closed")
	// ErrClusterMismatch: this node's data dir belongs to another cluster
	// (its cluster-id file names another id than the replicated state or
	// the controller). Open refuses to start.
	ErrClusterMismatch = errors.New("coordinator: data dir belongs to another cluster")
)
