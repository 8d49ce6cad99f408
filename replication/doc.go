// Package replication keeps a partition's replicas in step: the leader tracks what each follower
// has (and has made durable), advances the high watermark and answers acks=all producers; followers
// fetch the leader's batches over long-lived connections and append them byte for byte at the
// leader's offsets and epochs.
//
// # Roles
//
// A Replica is one local copy of a partition, wrapping its segment.Log and its EpochHistory. The
// coordinator's metadata makes it a leader (MakeLeader) or a follower (MakeFollower) at a leader
// epoch; nothing else changes its role. A leader takes client appends and follower fetches; a
// follower takes only what its Fetcher brings from the leader.
//
// # Positions and the two watermarks
//
// Each follower reports, with every fetch, its log end (the fetch offset) and its durable offset
// (everything below it is fsynced on the follower; with Config.AckMode AckMemory it equals the log
// end). The leader keeps:
//
//   - the high watermark: the smallest log end among the in-sync replicas (the leader included).
//     Consumers read below it; followers learn it from fetch responses.
//   - the durable watermark: the smallest durable offset among the in-sync replicas (the leader's
//     own flushed offset included). An acks=all produce is answered once the durable watermark
//     passes its last offset (AckFsync, the default), so an acknowledged record is on the disk of
//     every in-sync replica; with AckMemory it waits for the high watermark only, as Kafka does.
//
// Both are computed over the maximal ISR: the committed ISR plus members whose addition is being
// proposed, so neither can run ahead of a member about to count.
//
// Invariants (leader):
//   - highWatermark <= logEnd, durableWatermark <= highWatermark... is not required: the durable
//     watermark may pass the high watermark only if every member reported durability beyond what
//     it reported as fetched, which a follower never does; both are capped by the leader's log end.
//   - Neither watermark decreases while a replica leads at one epoch.
//   - A waiter registered at epoch E is answered at most once: with success when the durable
//     (or high) watermark passes its offset, or with NOT_LEADER_OR_FOLLOWER when the replica stops
//     leading at E.
//
// # Epoch history
//
// Each replica keeps, durably beside its log (file leader-epochs), the start offset of every leader
// epoch that wrote to it. A follower that starts following at a new epoch asks its leader
// (OffsetForLeaderEpoch) where its last epoch ends in the leader's log, truncates its own log there,
// and only then fetches: a former leader's unreplicated tail is cut, never served.
//
// # Concurrency
//
// Replica.mu guards the role and the leader state; the high watermark is also published in an
// atomic for lock-free reads by fetches. A Fetcher owns one connection to one leader and two
// goroutines (writer and reader) stopped by Close. Lock order: Manager.mu, then Fetcher.mu, then
// Replica.mu. No lock is held while calling into the log's durability callbacks' waiters.
package replication
