// Package segment is the partition log: an ordered list of segments, each a preallocated data file of
// Kafka record batches (v2) named by its base offset, with a sparse offset index and a time index
// beside it (package index).
//
// Directory of one log:
//
//	00000000000000000000.log        data: whole batches back to back, then preallocated zeroes
//	00000000000000000000.index      sparse offset index (index.OffsetIndex)
//	00000000000000000000.timeindex  sparse time index (index.TimeIndex)
//	00000000000000081920.log ...    the next segment; the last one is the active segment
//	recovery-point                  a position known to be fsynced (see below)
//	clean-shutdown                  present only between a clean Close and the next Open
//
// recovery-point file (28 bytes, big-endian):
//
//	offset  size  field
//	     0     8  base offset of the segment
//	     8     8  byte position in that segment: every byte before it was fdatasynced
//	    16     8  next offset at that position
//	    24     4  CRC-32C of bytes 0..23
//
// Invariants:
//   - Offsets are dense: each batch's baseOffset is the previous batch's last offset + 1, and each
//     segment's base offset is the previous segment's next offset.
//     Invariant: logStartOffset <= flushedOffset <= logEndOffset.
//   - A segment's logical size (published atomically) only covers whole, validated batches; readers
//     read nothing beyond it, so they never see a half-written batch. Appends fill preallocated
//     space, so the file size is not the logical size (except for sealed segments, trimmed at roll).
//   - Only the active segment is written. Rolling fsyncs and trims the old segment and its indexes
//     (it is sealed) before the new segment takes appends.
//   - The flushed offset is advanced only after fdatasync of every byte below it returned.
//
// Recovery: after a clean Close the log reopens without validating data. After a crash each segment
// is scanned from a trusted point (the recovery point in its segment, or for sealed segments their
// last verified index entry) to the first byte that is not a valid next batch; the tail after it is
// discarded and zeroed, and the indexes are rebuilt from that point. Bytes below the recovery point
// were fsynced and are never discarded. The two index files are flushed separately, so the segment
// holding the recovery point also replays its time index from the batch headers below that point;
// a sealed segment's time index is replayed only when it visibly lost entries. Index entries below
// the verified one are loaded unchecked: reads check each entry against the batch header they read
// anyway and fall back to scanning from the segment start, and Truncate resumes from a verified one.
//
// Concurrency: one writer at a time (Append, Truncate, retention and roll take appendMu) and any
// number of concurrent readers, which take no lock held by the writer during I/O: the segment list is
// a copy-on-write snapshot and each segment's logical size is an atomic. Lock order: appendMu, then
// flush.mu; appendMu, then a segment's closing lock (the flusher syncs outside appendMu, holding it
// shared, so that retention cannot close the file under it). Segments removed by retention or truncation stay open for Config.FileDeleteDelay so that
// readers holding a Slice can finish sending it.
package segment
