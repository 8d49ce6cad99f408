// Package coordinator keeps sluice's cluster metadata — registered brokers,
// topics, their partitions' placement and config overrides, and the cluster
// id — in a state machine replicated by hashicorp/raft. Raft carries
// metadata only, never records.
//
// # Shape
//
// A node's Raft log and stable store live in DataDir/raft.db (raft-boltdb)
// and its snapshots in DataDir/snapshots/. A node started with
// Config.Bootstrap and no state bootstraps a cluster in which it is the only
// voter; on later starts it reopens its log and snapshots and replays them.
// Before bbolt maps raft.db, Open checks its meta pages against the file size
// (bolt_check.go): a file cut short is refused with ErrCorruptLog instead of
// crashing the process with SIGBUS.
//
// Changes go through the Raft leader ("controller"). The leader validates a
// request against its snapshot, decides everything random (topic id,
// placement start) and proposes a command; the FSM applies commands
// deterministically and re-checks what concurrent changes may have broken.
// Placement policy (AssignReplicas) and topic config rules
// (ValidateTopicConfig) are pure functions in their own files.
//
// # Log entry format
//
//	+--------+----------------------------------+
//	| offset | field                            |
//	+--------+----------------------------------+
//	| 0      | command type (uint8, see below)  |
//	| 1..n   | JSON body of that command type   |
//	+--------+----------------------------------+
//
//	1 noop   2 init-cluster   3 register-broker   4 create-topic
//	5 delete-topic   6 create-partitions   7 alter-topic-configs
//	8 commit-offsets   9 delete-group-offsets   10 delete-partition-offsets
//	11 allocate-producer-ids   12 delete-topic-and-offsets
//	13 write-group-state   14 alter-group-configs
//	15 fence-broker   16 unfence-broker   17 alter-partition
//	18 elect-preferred   19 write-transactions   20-22 ACLs and SCRAM
//	23 demote-unreachable   24 resign-leader
//
// New commands (voters, ...) take new type numbers; existing numbers and
// JSON field names never change meaning. A node that meets a type it does
// not know panics rather than diverge. Snapshots are one JSON document
// (snapshotFile) with a format number (4 since group state, 3 since
// producer ids, 2 since consumer offsets; 1 to 3 are still read).
//
// # Consumer offsets
//
// Committed consumer-group offsets (offset, leader epoch, metadata string)
// are replicated state too, but kept apart from Metadata in an immutable
// *Offsets read with Coordinator.Offsets: commits are frequent, and must not
// bump Metadata.Version or wake subscribers. CommitOffsets hands commits to a
// batcher goroutine that puts every commit queued while the previous entry
// was in Raft (up to Config.OffsetCommitBatch, after at most
// Config.OffsetCommitLinger) into one commit-offsets entry, so a Raft round
// (about 1 ms) is paid per batch, never per partition. Membership and
// generation checks belong to the proposer (the broker's group
// coordinator); application stores what it is given. DeleteTopic proposes
// delete-topic-and-offsets (12), which also drops the topic's offsets;
// delete-topic (5) keeps its original meaning for older logs.
//
// # Group state
//
// KIP-848 consumer groups and KIP-932 share groups keep more than offsets:
// group records (type and an opaque body the broker's group packages
// encode: epochs, members, assignments), share-partition states (the share
// group's start offset and its in-flight records' states and delivery
// counts, as ranges) and group configs. They live in an immutable
// *GroupState beside Offsets, read with Coordinator.GroupState, changed by
// write-group-state (13) and alter-group-configs (14). WriteGroupState
// proposes one entry per call; the broker gathers everything that changed
// while its previous write was in Raft into the next call, so a Raft round
// is paid per batch, never per record. Share state carries the topic id:
// state of a deleted topic is ignored by a topic re-created under its name.
//
// # Producer ids
//
// Idempotent producers get ids that must be unique for the cluster's
// lifetime. Brokers reserve them in blocks (AllocateProducerIDs, one
// allocate-producer-ids entry per block) and hand them out from memory; the
// next free id is replicated state beside Metadata, like offsets, and is in
// snapshots. Ids of a block a broker did not finish are lost, never reused.
//
// # Invariants
//
//   - A published *Metadata and everything reachable from it is immutable;
//     each applied change publishes a new one (copy-on-write), so readers
//     never lock.
//   - Metadata.Version is the Raft index of the last applied change and
//     never decreases on a running node.
//   - ControllerID is this node's id only after it has become leader and
//     applied every entry committed before its term; IsLeader and every
//     change require that.
//   - The cluster id is set once, by the first leader, and never changes.
//   - Partitions[i].Index == i; a new partition's leader is its first
//     replica, at epoch 0, with ISR == Replicas.
//   - The next free producer id never decreases; blocks never overlap.
//
// # Concurrency
//
// Goroutines: Raft's own (stopped by Close through raft.Shutdown), one
// leadership goroutine that keeps ControllerID current, the offset-commit
// batcher, and one goroutine per subscription. Locks: the view's mutex,
// which orders published snapshots (never held while calling out, nothing
// blocks while holding it), and the offset queue's RWMutex, held for reading
// by CommitOffsets while it enqueues and for writing only by the exiting
// batcher; the two are never held together.
package coordinator
