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
// recovery-point file (56 bytes, big-endian; bytes 0..27 are the whole file older versions wrote,
// which is still read, its time index counting as unknown):
//
//	offset  size  field
//	     0     8  base offset of the segment
//	     8     8  byte position in that segment: every byte before it was fdatasynced
//	    16     8  next offset at that position
//	    24     4  CRC-32C of bytes 0..23
//	    28     8  time index entries the segment's .timeindex file held when the point was written
//	              (-1: unknown); the entries of every batch before the position are among them
//	    36     8  timestamp of the last of those entries
//	    44     8  offset of the last of those entries
//	    52     4  CRC-32C of bytes 0..51 (when it fails, the point stands and the time index is unknown)
//
// Invariants:
//   - Offsets are dense: each batch's baseOffset is the previous batch's last offset + 1, and each
//     segment's base offset is the previous segment's next offset.
//     Invariant: logStartOffset <= flushedOffset <= logEndOffset.
//   - A segment's extent (logical size and next offset, published together as one immutable value)
//     only covers whole batches: validated ones, and damaged ranges recovery kept in place. Readers
//     read nothing beyond it, so they never see a half-written batch, nor a batch at or beyond upTo.
//     The segment list and the log start are likewise published together (logView). Appends fill
//     preallocated space, so the file size is not the logical size (except for sealed segments,
//     trimmed at roll). Preallocation is lazy: nothing before a segment's first append, then steps
//     of 64 KiB doubling up to Config.PreallocateStep, then (Config.PreallocateRest, where the
//     filesystem has room) the rest of the segment at once.
//   - Only the active segment is written. Rolling fsyncs and trims the old segment and its indexes
//     (it is sealed) before the new segment takes appends, so every segment but the last is durable
//     whole.
//   - The flushed offset is advanced only after fdatasync of every byte below it returned. The
//     writeback the log does under FlushByOS (Config.WritebackBytes, sync_file_range) moves
//     nothing: it only keeps dirty pages from piling up.
//   - Recovery never discards a byte below the durable point, and never deletes a segment.
//
// Recovery: each segment has a durable point below which every byte was fsynced: the file end for a
// sealed segment (which must end at the next segment's base offset) and for the last segment after
// a clean Close; the recovery point for the last segment after a crash (nothing of it when the point
// names an earlier segment). Each segment is scanned from a trusted point (its last verified index
// entry at or below the durable point) to the end. Bytes that are not a valid next batch:
//   - at or beyond the durable point of the last segment, are a torn tail: it is cut, and the indexes
//     rebuilt from the trusted point;
//   - below the durable point, are damage: the range is logged at ERROR, kept in place and recorded
//     in the segment's extent, and the scan resumes at the first later batch boundary that checks out
//     (the damaged batch's own length, a verified index entry, or the durable point). Reads of its
//     offsets fail with ErrCorrupt (the broker answers CORRUPT_MESSAGE); reads before it stop short of
//     it. A sealed segment that ends short of the next base has its missing offsets recorded the same
//     way. A recovery point that names only zeroes, or contradicts the data, is stale and ignored.
//   - Open fails with ErrCorrupt, deleting and cutting nothing, when a segment holds offsets past the
//     next segment's base, or damage in the last segment has no boundary after it to resume from.
//
// Open reads of each segment only the tail after its trusted point (plus, to replay a time index that
// lost entries, the batch headers after its newest surviving entry), after a clean Close and after a
// crash with a recent recovery point alike: never a whole segment, except the active one when no
// recovery point names it. It seals a sealed segment again (three fsyncs) only when recovery changed
// it: an untrimmed file, or index entries it rebuilt. The index files are not fsynced with the data,
// so after a machine crash the time index may have lost entries for batches below the recovery
// point: it is replayed when it holds fewer entries than the point recorded, or a different last one
// (always, when the point does not know); a sealed segment's only when it visibly lost entries.
//
// Damage before the trusted point is not looked for at Open (that would read every segment on each
// start): a read whose header walk meets it gets ErrCorrupt, except that a read starting at the
// intact batch just before a damaged header still gets that batch (its CRC is checked when the next
// header does not confirm where it ends), so reads reach every intact batch up to the damage; a
// flipped bit inside records is served as it is on disk, for the client's CRC check to catch, as
// Kafka does. Index entries below the verified one are loaded unchecked: reads check each entry
// against the batch header they read anyway and fall back to scanning from the run start, and
// Truncate resumes from a verified one.
//
// Truncate is durable on return and crash-safe: later segments are unlinked newest first, each
// unlink fsynced in the directory; then the segment holding the new end is cut and fsynced, and the
// recovery point naming the new end is fsynced before any append can follow.
//
// Concurrency: one writer at a time (Append, Truncate, retention and roll take appendMu) and any
// number of concurrent readers, which take no lock held by the writer during I/O: the segment list is
// a copy-on-write snapshot and each segment's extent an atomic pointer. Lock order: appendMu, then
// flush.mu; appendMu, then a segment's closing lock (the flusher syncs outside appendMu, holding it
// shared, so that retention cannot close the file under it). Segments removed by retention or
// truncation stay open for Config.FileDeleteDelay so that readers holding a Slice can finish sending
// it.
package segment
