package coordinator

// The Raft log lives in a bolt file (raft.db) that bbolt memory-maps. A file cut short (a copy that
// stopped half-way, a truncated restore, a filesystem that lost its tail) still opens, and the first
// read of a page past the end of the file kills the process with SIGBUS. checkBoltFile reads the two
// meta pages first and refuses such a file with ErrCorruptLog instead.
//
// bolt file layout (native byte order, little-endian on every platform sluice runs on):
//
//	page 0 at offset 0 and page 1 at offset pageSize: meta pages (bolt writes them alternately)
//	page header (16 bytes): id uint64, flags uint16 (0x04 = meta), count uint16, overflow uint32
//	meta (after the header):
//	  offset  size  field
//	       0     4  magic 0xED0CDAED
//	       4     4  version (2)
//	       8     4  page size
//	      12     4  flags
//	      16    16  root bucket (root page id, sequence)
//	      32     8  freelist page id
//	      40     8  high-water mark: number of pages in use (every page id < it)
//	      48     8  transaction id
//	      56     8  FNV-1a 64 checksum of bytes 0..55
//
// bolt uses the valid meta page with the higher transaction id; every page that meta can reach lies
// below its high-water mark, so the file must hold at least highWaterMark * pageSize bytes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeaderSize = 16
	boltMetaSize       = 64
	boltMetaPageFlag   = 0x04
	// boltMaxPageSize bounds the page size a meta page may claim; bolt uses the OS page size.
	boltMaxPageSize = 1 << 16
)

// boltMeta is the part of a bolt meta page the check needs.
type boltMeta struct {
	pageSize      uint32
	highWaterMark uint64
	txid          uint64
}

// checkBoltFile returns nil for a missing or empty file (bolt creates it) and for a file whose
// newest valid meta page describes pages that all lie inside the file; otherwise an error wrapping
// ErrCorruptLog.
func checkBoltFile(path string) error {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("coordinator: check raft log %s: %w", path, err)
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return fmt.Errorf("coordinator: check raft log %s: %w", path, err)
	}
	size := info.Size()
	if size == 0 {
		return nil
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s (%d bytes): %s; restore the node's meta directory from a backup, or remove it to rejoin or rebuild the node's metadata",
			ErrCorruptLog, path, size, fmt.Sprintf(format, args...))
	}

	// Meta page 0 says the page size; meta page 1 sits one page further.
	head := make([]byte, boltPageHeaderSize+boltMetaSize)
	if _, err := file.ReadAt(head, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return corrupt("shorter than a meta page")
		}
		return fmt.Errorf("coordinator: check raft log %s: %w", path, err)
	}
	first, firstErr := parseBoltMeta(head, 0)
	var candidates []boltMeta
	if firstErr == nil {
		candidates = append(candidates, first)
	}
	// With meta page 0 damaged, bolt looks for meta page 1 at the OS page size.
	pageSize := int64(os.Getpagesize())
	if firstErr == nil {
		pageSize = int64(first.pageSize)
	}
	second, secondErr := readBoltMeta(file, pageSize, 1)
	if secondErr == nil {
		candidates = append(candidates, second)
	}
	if len(candidates) == 0 {
		return corrupt("no valid meta page (page 0: %v; page 1: %v)", firstErr, secondErr)
	}
	newest := candidates[0]
	for _, m := range candidates[1:] {
		if m.txid > newest.txid {
			newest = m
		}
	}
	if need := int64(newest.highWaterMark) * int64(newest.pageSize); size < need {
		return corrupt("its meta page (transaction %d) uses %d pages of %d bytes, %d bytes, but the file ends %d bytes short: it was truncated",
			newest.txid, newest.highWaterMark, newest.pageSize, need, need-size)
	}
	if size%int64(newest.pageSize) != 0 {
		return corrupt("the size is not a multiple of the page size %d: it was truncated", newest.pageSize)
	}
	return nil
}

func readBoltMeta(file *os.File, offset int64, want uint64) (boltMeta, error) {
	page := make([]byte, boltPageHeaderSize+boltMetaSize)
	if _, err := file.ReadAt(page, offset); err != nil {
		return boltMeta{}, fmt.Errorf("read meta page at %d: %w", offset, err)
	}
	return parseBoltMeta(page, want)
}

// parseBoltMeta checks a meta page (header and meta) that should carry page id want.
func parseBoltMeta(page []byte, want uint64) (boltMeta, error) {
	order := binary.LittleEndian
	if id := order.Uint64(page[0:8]); id != want {
		return boltMeta{}, fmt.Errorf("page id %d, want %d", id, want)
	}
	if flags := order.Uint16(page[8:10]); flags&boltMetaPageFlag == 0 {
		return boltMeta{}, fmt.Errorf("page flags %#x: not a meta page", flags)
	}
	meta := page[boltPageHeaderSize:]
	if magic := order.Uint32(meta[0:4]); magic != boltMagic {
		return boltMeta{}, fmt.Errorf("magic %#x", magic)
	}
	if version := order.Uint32(meta[4:8]); version != boltVersion {
		return boltMeta{}, fmt.Errorf("version %d", version)
	}
	sum := fnv.New64a()
	sum.Write(meta[:56])
	if stored := order.Uint64(meta[56:64]); stored != sum.Sum64() {
		return boltMeta{}, fmt.Errorf("checksum %#x, computed %#x", stored, sum.Sum64())
	}
	m := boltMeta{pageSize: order.Uint32(meta[8:12]), highWaterMark: order.Uint64(meta[40:48]), txid: order.Uint64(meta[48:56])}
	if m.pageSize < 1024 || m.pageSize > boltMaxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, fmt.Errorf("page size %d", m.pageSize)
	}
	if m.highWaterMark < 2 {
		return boltMeta{}, fmt.Errorf("high-water mark %d pages", m.highWaterMark)
	}
	return m, nil
}
