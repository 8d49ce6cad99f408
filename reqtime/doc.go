// Package reqtime records where one request's time goes: a Timeline is a small value (no pointers,
// no allocation) holding the interval of each stage a request passed through, relative to the
// instant its frame was received.
//
// Stages of a produce: Queue (received until its handler starts), Append (handler start until every
// partition's batches are in the log), Fsync (until the leader's log has fdatasynced them, acks=-1
// with replica acks on fsync), Replication (until every in-sync replica acknowledged them, acks=-1),
// Send (response handed to the network layer until its last byte left). Stages of a fetch: Queue,
// Wait (handler start until the read that answered it, the long poll), Read (that read and the
// framing of the response), Send.
//
// Invariants:
//   - A stage is either absent or recorded with 0 <= begin <= end (offsets from Received, on the
//     monotonic clock); recording a stage again replaces it.
//   - The package does no I/O and reads no clock: callers pass every instant in.
package reqtime
