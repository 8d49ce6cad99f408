package compaction

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"time"
)

// checkpoint is what the cleaner remembers of one log between passes, in the file cleaner-checkpoint
// in the log's directory (big-endian):
//
//	offset      size  field
//	     0         8  first dirty offset: records below it were cleaned by some pass
//	     8         4  n, the number of passes listed
//	    12      16*n  passes: end offset (8; the pass cleaned records below it), time in ms (8)
//	12+16*n        4  CRC-32C of the bytes before it
//
// A missing or damaged file means nothing was cleaned: the next pass starts at the log start, which
// only cleans more and keeps tombstones longer. The file is written to a temporary name, fsynced and
// renamed, so it is always whole.
//
// Invariant: passes are sorted by end and by time, each end <= firstDirty.
type checkpoint struct {
	firstDirty int64
	passes     []pass
}

// pass records that the records below end had been cleaned by time at.
type pass struct {
	end int64
	at  int64 // ms
}

const checkpointFile = "cleaner-checkpoint"

// maxPasses bounds the pass list: older entries merge, keeping the later time (tombstones kept
// longer, never shorter).
const maxPasses = 64

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func readCheckpoint(dir string) checkpoint {
	raw, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if err != nil || len(raw) < 16 {
		return checkpoint{}
	}
	n := int(binary.BigEndian.Uint32(raw[8:]))
	if n > maxPasses || len(raw) != 16+16*n {
		return checkpoint{}
	}
	if crc32.Checksum(raw[:len(raw)-4], castagnoli) != binary.BigEndian.Uint32(raw[len(raw)-4:]) {
		return checkpoint{}
	}
	c := checkpoint{firstDirty: int64(binary.BigEndian.Uint64(raw))}
	for i := 0; i < n; i++ {
		p := raw[12+16*i:]
		c.passes = append(c.passes, pass{end: int64(binary.BigEndian.Uint64(p)), at: int64(binary.BigEndian.Uint64(p[8:]))})
	}
	return c
}

func writeCheckpoint(dir string, c checkpoint) error {
	raw := binary.BigEndian.AppendUint64(nil, uint64(c.firstDirty))
	raw = binary.BigEndian.AppendUint32(raw, uint32(len(c.passes)))
	for _, p := range c.passes {
		raw = binary.BigEndian.AppendUint64(raw, uint64(p.end))
		raw = binary.BigEndian.AppendUint64(raw, uint64(p.at))
	}
	raw = binary.BigEndian.AppendUint32(raw, crc32.Checksum(raw, castagnoli))
	temp := filepath.Join(dir, checkpointFile+".tmp")
	f, err := os.Create(temp)
	if err != nil {
		return fmt.Errorf("compaction: write checkpoint: %w", err)
	}
	_, err = f.Write(raw)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(temp, filepath.Join(dir, checkpointFile))
	}
	if err != nil {
		return fmt.Errorf("compaction: write checkpoint in %s: %w", dir, err)
	}
	return nil
}

// cleanedAt returns when the record at offset was first cleaned (ms), or false if never.
func (c checkpoint) cleanedAt(offset int64) (int64, bool) {
	for _, p := range c.passes {
		if offset < p.end {
			return p.at, true
		}
	}
	return 0, false
}

// withPass records a pass that cleaned below end at time now, dropping what retention no longer needs:
// passes whose tombstones may all go merge into one, and the list stays within maxPasses.
func (c checkpoint) withPass(end int64, now time.Time, deleteRetention time.Duration) checkpoint {
	nowMs := now.UnixMilli()
	var passes []pass
	for _, p := range c.passes {
		if p.end > end {
			p.end = end // a truncated log: nothing at or past end was cleaned
		}
		if n := len(passes); n > 0 && (passes[n-1].end >= p.end || nowMs-p.at >= deleteRetention.Milliseconds()) {
			passes[n-1] = pass{end: max(passes[n-1].end, p.end), at: p.at}
			continue
		}
		passes = append(passes, p)
	}
	if n := len(passes); n == 0 || passes[n-1].end < end {
		passes = append(passes, pass{end: end, at: nowMs})
	}
	for len(passes) > maxPasses {
		passes = passes[1:] // the oldest merges into the next: its records count as cleaned later
	}
	return checkpoint{firstDirty: end, passes: passes}
}
