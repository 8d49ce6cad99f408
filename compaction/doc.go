// Package compaction is the log cleaner: it compacts partition logs of topics with
// cleanup.policy=compact, keeping the latest record of each key, as Kafka's log cleaner does.
//
// Pure policy and I/O are apart. policy.go decides, from a log's segment list and the cleaner's
// checkpoint, which part of the log a pass may clean (PlanCleaning: the dirty ratio, the minimum and
// maximum compaction lags) and how sealed segments are grouped for rewriting; keymap.go is the
// fixed-memory key map; filter.go decides per record and per batch what stays. cleaner.go does the
// reading and writing, through segment.Log's Read and its atomic Replacement of sealed segments
// (segment/log_replace.go), and checkpoint.go keeps what the cleaner remembers per log.
//
// A pass over one log:
//
//	log start        first dirty                 first uncleanable      log end
//	|---- clean -------|--------- dirty -----------|---- too young / active ----|
//	1. key map: latest offset of each key in [first dirty, end), end <= first uncleanable (the map
//	   may fill up first: the pass then ends early and the next one goes on);
//	2. every sealed segment from the log start up to end is rewritten, in groups of at most one
//	   segment size, each swapped in atomically;
//	3. the checkpoint records end as the new first dirty offset, and when the pass ran.
//
// Invariants:
//   - Offsets never change. A kept batch keeps its base offset, offset range, timestamps, producer
//     fields and codec; a batch losing all its records leaves a filler batch (no records, no
//     producer) over its offsets, or, when it is its producer's last, its own header with no
//     records. So batches stay dense and every reader (fetch, replication, ListOffsets, recovery)
//     walks the log as before; clients skip offsets no record holds, as they do on Kafka.
//   - The active segment is never cleaned, nor any segment whose newest record is younger than the
//     minimum compaction lag.
//   - Reading a cleaned log from its start gives, per key, its latest record (a tombstone until
//     delete retention passed since the pass that first cleaned it, then nothing), in offset order.
//     Records after the first uncleanable offset are as produced.
//   - A crash at any point leaves the log readable and complete: each group swap is atomic, and a
//     checkpoint lagging behind a swap only makes the next pass clean again.
//   - Transactional and control batches are kept whole and their keys do not enter the key map.
//   - Memory: the key map (Config.KeyMapBytes) plus one read and one write buffer. I/O: Throttle.
//
// Leaders and followers clean their own logs independently; since each keeps the latest record of
// every key, readers see the same latest value per key on any replica.
package compaction
