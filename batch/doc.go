// Package batch parses and validates Kafka record batches (magic v2), the unit the partition log
// appends and the unit producers send and consumers receive.
//
// Layout of the 61-byte batch header (all integers big-endian):
//
//	offset  size  field
//	     0     8  baseOffset            assigned by the log (rewritten in place)
//	     8     4  batchLength           bytes after this field: total size - 12
//	    12     4  partitionLeaderEpoch  assigned by the log (rewritten in place)
//	    16     1  magic                 must be 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes 21..end
//	    21     2  attributes            bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
//	    23     4  lastOffsetDelta       record count - 1 for batches written by clients
//	    27     8  baseTimestamp
//	    35     8  maxTimestamp
//	    43     8  producerId
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordCount
//	    61     -  records (one compressed block when the codec is not none)
//
// baseOffset and partitionLeaderEpoch lie outside the CRC, so the log assigns offsets without
// recomputing it.
//
// Invariants of a batch that passes Validate:
//   - batchLength >= HeaderSize-12 and the whole batch lies inside the given bytes;
//   - magic == 2 and the CRC matches;
//   - lastOffsetDelta >= 0 and recordCount == lastOffsetDelta+1 (when ExpectDenseOffsets).
//
// Functions here never panic on malformed input and never claim more valid bytes than they were given.
package batch
