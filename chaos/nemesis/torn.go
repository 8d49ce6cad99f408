package nemesis

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/batch"
)

// A torn tail is what a machine crash leaves of writes the disk had not made durable: the end of
// the newest segment cut short, overwritten with garbage or zeroed. TearTails does this to a
// stopped node's partitions, only to bytes past the log's recovery point (segment/doc.go: bytes
// below it were fsynced, and sluice by design trusts them without a scan; changing those would be
// media corruption, which sluice does not claim to detect). The recovery point is written lazily
// after fsyncs, so the bytes torn may include fsynced, acknowledged ones: this node loses them and
// must fetch them again from the others.

const recoveryPointFile = "recovery-point"

// TearTails garbles the newest segment of each partition directory under topicsDir whose name
// starts with prefix, and returns one line per partition saying what it did.
func TearTails(topicsDir, prefix string, seed uint64) ([]string, error) {
	rng := rand.New(rand.NewPCG(seed, 0x7077))
	entries, err := os.ReadDir(topicsDir)
	if err != nil {
		return nil, fmt.Errorf("nemesis: %w", err)
	}
	var done []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		what, err := tearTail(filepath.Join(topicsDir, e.Name()), rng)
		if err != nil {
			return done, err
		}
		if what != "" {
			done = append(done, e.Name()+": "+what)
		}
	}
	return done, nil
}

func tearTail(dir string, rng *rand.Rand) (string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(names) == 0 {
		return "", err
	}
	slices.Sort(names) // base offsets are zero-padded: the last name is the newest segment
	newest := names[len(names)-1]
	data, err := os.ReadFile(newest)
	if err != nil {
		return "", fmt.Errorf("nemesis: %w", err)
	}
	end := dataEnd(data)
	start := int64(0)
	if base, position, ok := readRecoveryPoint(dir); ok {
		newestBase := baseOffsetOf(newest)
		switch {
		case base == newestBase:
			start = position
		case base > newestBase:
			start = end // the recovery point is ahead (should not happen): leave it alone
		}
	}
	if end <= start {
		return "", nil
	}
	cut := start + rng.Int64N(end-start) // tear from here
	if end-cut > 64<<10 {
		cut = end - 1 - rng.Int64N(64<<10)
	}
	f, err := os.OpenFile(newest, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("nemesis: %w", err)
	}
	defer f.Close()
	var what string
	switch rng.IntN(3) {
	case 0:
		err = f.Truncate(cut)
		what = fmt.Sprintf("%s truncated at byte %d of %d", filepath.Base(newest), cut, end)
	case 1:
		garbage := make([]byte, end-cut)
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		_, err = f.WriteAt(garbage, cut)
		what = fmt.Sprintf("%s bytes %d..%d garbled", filepath.Base(newest), cut, end)
	default:
		_, err = f.WriteAt(make([]byte, end-cut), cut)
		what = fmt.Sprintf("%s bytes %d..%d zeroed", filepath.Base(newest), cut, end)
	}
	if err != nil {
		return "", fmt.Errorf("nemesis: tear %s: %w", newest, err)
	}
	return what, nil
}

// dataEnd is the end of the chain of plausible batch headers from the start of a segment.
func dataEnd(data []byte) int64 {
	position := 0
	for position+batch.HeaderSize <= len(data) {
		h, err := batch.ParseHeader(data[position:])
		if err != nil || h.BatchLength <= 0 || position+h.Size() > len(data) {
			break
		}
		position += h.Size()
	}
	return int64(position)
}

func baseOffsetOf(path string) int64 {
	var base int64
	fmt.Sscanf(strings.TrimSuffix(filepath.Base(path), ".log"), "%d", &base)
	return base
}

// readRecoveryPoint reads segment/doc.go's recovery-point file: base offset, byte position, next
// offset, CRC-32C.
func readRecoveryPoint(dir string) (base, position int64, ok bool) {
	raw, err := os.ReadFile(filepath.Join(dir, recoveryPointFile))
	if err != nil || len(raw) < 28 {
		return 0, 0, false
	}
	if crc32.Checksum(raw[:24], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(raw[24:]) {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(raw)), int64(binary.BigEndian.Uint64(raw[8:])), true
}
