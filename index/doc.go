// Package index holds the sparse indexes of one log segment: the offset index, which maps an offset
// to the byte position of the batch holding it, and the time index, which maps a timestamp to the
// first offset whose batch may hold it.
//
// Both are fixed-width tables of big-endian entries, relative to the segment's base offset:
//
//	offset index entry (8 bytes)          time index entry (12 bytes)
//	offset  size  field                   offset  size  field
//	     0     4  offset - base                0     8  max timestamp so far (ms)
//	     4     4  byte position in segment     8     4  offset - base
//
// The log adds an entry every N bytes of data (sparse): a lookup is a binary search here followed by
// a short forward scan of batch headers in the data file.
//
// Invariants:
//   - offset index: offsets and positions strictly increase from entry to entry;
//   - time index: timestamps and offsets strictly increase;
//   - entries are held in memory; the file holds a prefix of them (Flush writes the rest, Seal writes
//     all, trims the file to its entries and fsyncs it). A file cut anywhere, or holding garbage after
//     a valid prefix, loads as its longest valid prefix: a lost entry costs only a longer scan, never a
//     wrong answer, because the log verifies an entry before trusting it for recovery.
//
// Concurrency: one writer (Append, Truncate, Flush, Seal) and any number of concurrent readers
// (Lookup*, Len, Last). The writer side must be serialized by the caller.
package index
