// Package txn is the transaction coordinator's policy: the states of one transactional id and the
// transitions Kafka's transactional producers drive (InitProducerId, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn) and the coordinator's own (completing after the markers are written,
// aborting a transaction left open past its timeout). Pure functions: no I/O, no clock (times are
// passed in as Unix milliseconds), no goroutines. The broker holds the lock that serializes the
// transitions of one id, persists every new Metadata through the Raft coordinator before acting on
// it, and writes the markers.
//
// States, as Kafka names them:
//
//	Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
//	  ▲                                   │  └──EndTxn(abort), timeout, fencing──▶ PrepareAbort ──markers──▶ CompleteAbort
//	  └──────────── InitProducerId (epoch + 1) ◀───────────────────────── Complete* / Empty
//
// Invariants:
//   - Partitions and Groups are empty in Empty, CompleteCommit and CompleteAbort; sorted and unique
//     otherwise (Partitions are where the markers go).
//   - ProducerEpoch never decreases for one ProducerID; a request carrying another epoch than the
//     current one is fenced (PRODUCER_FENCED), except the one InitProducerId retry KIP-360 allows
//     with LastProducerEpoch, the epoch before a bump the coordinator made on its own (timeout).
//   - A transaction in PrepareCommit or PrepareAbort has its outcome decided: it only ever moves to
//     the matching Complete state, and any other request meanwhile gets CONCURRENT_TRANSACTIONS.
package txn
