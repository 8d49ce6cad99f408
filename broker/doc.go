// Package broker serves the Kafka protocol on top of the partition logs (package segment) and the
// cluster metadata (package coordinator): one file per Kafka API, each opening with the versions it
// serves, what it does and what it refuses with which error code.
//
// Request path: netpoll hands each complete frame to Broker.Serve on its event loop. Serve queues it
// on the connection's session; a per-connection worker goroutine (started on demand, gone when the
// queue is empty) parses and handles requests one at a time in arrival order, so two produce requests
// on one connection append in the order they were sent. A handler never waits for disk durability or
// new data on the worker: acks=all produces complete from the log's group-commit callback and
// long-poll fetches from a partition's append notification or their timer; netpoll keeps responses in
// request order whatever completes first.
//
// Invariants:
//   - Every request gets exactly one Send or Skip on its Responder (Skip only for acks=0 produce).
//   - The partition registry is a copy-on-write snapshot replaced only by the metadata subscription
//     goroutine (partition_offline.go serializes its retries with it); a partition's log is open on
//     this node iff the node is one of its replicas in the applied metadata and the log opened, else
//     the partition is recorded offline and answers KAFKA_STORAGE_ERROR.
//   - A partition directory holds the id of the topic it belongs to (partition_dir.go); a directory
//     with another id, or with data and no id, is moved aside, never adopted and never deleted.
//   - Fetch responses carry record bytes as file ranges (segment.Slice), never copied into the
//     response buffer by the broker.
//
// Consumer groups (groups.go): membership state machines from package group, one per group id, in
// memory; committed offsets in the Raft coordinator. JoinGroup and SyncGroup requests wait parked in
// their group and are answered by whichever request or group timer completes the rebalance;
// OffsetCommit is answered from the coordinator's commit batcher callback.
//
// Idempotent producers (init_producer_id.go, producer_state.go): producer ids come from blocks
// reserved through the coordinator; each partition keeps its producers' epochs and last five batches
// in memory (rebuilt from its log's tail after a restart) and checks, appends and records an
// idempotent batch as one step under its producers.mu.
//
// Security (security.go, session_auth.go, sasl_*.go, authorize*.go): a SASL connection serves only
// ApiVersions and the SASL APIs until it authenticates; every request then passes its API's
// authorization rule before its handler, which sees the request without the resources the
// principal may not touch (those come back refused in the response). ACLs and SCRAM credentials
// are read from the coordinator's Security snapshot (one atomic load) at each decision.
// sessionAuth.mu is a leaf lock, held across one SASL step (a PBKDF2 run for PLAIN against SCRAM
// credentials) and nothing else.
//
// Lock order: offlinePartitions.applyMu, then offlinePartitions.mu; registry.mu, then partition.waiters.mu; separately groupCoordinator.mu, then
// groupEntry.mu. No lock is held while calling into segment or coordinator (the group lock is
// released before offsets go to the coordinator), with two exceptions that take no other broker
// lock: partition.producers.mu is held across segment's Append and a transaction-state rescan of
// the log (never across a durability wait), and producerIDAllocator.mu across the Raft round that
// reserves a block. The transaction coordinator holds a transactional id's lock (txnCoordinator.locks)
// across its Raft writes and marker writes, which take partition.producers.mu inside it.
package broker
