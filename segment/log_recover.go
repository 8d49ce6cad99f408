package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

const (
	recoveryPointFile = "recovery-point"
	cleanShutdownFile = "clean-shutdown"
	recoveryPointSize = 56
	// legacyRecoveryPointSize is the point without the time index fields, as older versions wrote it;
	// the current format begins with it, so that readers of the old one still read the point.
	legacyRecoveryPointSize = 28
	// recoveryChunk is how much of a data file recovery reads at a time.
	recoveryChunk = 4 << 20
	// verifyAttempts bounds how many index entries recovery tries before scanning a whole segment.
	verifyAttempts = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type recoveryPoint struct {
	segmentBase int64
	position    int64
	nextOffset  int64
	// timeEntries is the number of time index entries the segment's time index file held when the
	// point was written, and lastTime the last of them; -1 when not known. Entries for every batch
	// below position are among them.
	timeEntries int64
	lastTime    index.TimeEntry
}

// unknownTimeIndex is a recovery point's time index fields when the file may not hold the entries.
const unknownTimeIndex = -1

// timeIndexIntact reports whether s's time index holds, unchanged, the entries the point recorded:
// then no entry for a batch below the point was lost, and the time index needs no replay.
func (p recoveryPoint) timeIndexIntact(s *segment) bool {
	if p.timeEntries < 0 || int64(s.times.Len()) < p.timeEntries {
		return false
	}
	if p.timeEntries == 0 {
		return true
	}
	entries := s.times.Entries()
	return entries[p.timeEntries-1] == p.lastTime
}

// Open opens the log in dir, creating dir and an empty first segment when there is none, and
// recovers it as the package doc describes. It fails with ErrCorrupt, deleting nothing, when the
// segments cannot form one log: a segment holds offsets beyond the next one's base, or damage below
// the durable point of the last segment has no batch boundary after it to resume from.
func Open(dir string, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("segment: create %s: %w", dir, err)
	}
	l := &Log{dir: dir}
	l.config.Store(&cfg)
	logger := cfg.logger()
	if err := finishReplace(dir); err != nil { // a swap of cleaned segments cut short (log_replace.go)
		return nil, err
	}
	bases, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(dir, cleanShutdownFile))
	clean := statErr == nil
	point, hasPoint := readRecoveryPoint(dir)

	var segments []*segment
	closeAll := func() {
		for _, s := range segments {
			s.close()
		}
	}
	if len(bases) == 0 {
		s, err := createSegment(dir, 0, &cfg)
		if err != nil {
			return nil, err
		}
		segments = append(segments, s)
	}
	for i, base := range bases {
		s, err := openSegment(dir, base, &cfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		segments = append(segments, s)
		info, err := s.file.Stat()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("segment: stat %s: %w", s.dataPath, err)
		}
		fileSize := info.Size()
		var durable durablePoint
		var from index.OffsetEntry
		var replay bool
		switch {
		case i < len(bases)-1:
			// Sealed: rolling trimmed and fsynced it whole before the next segment existed, so all of
			// it is durable and it ends where the next segment begins.
			durable = durablePoint{position: fileSize, offset: bases[i+1], end: true}
			from = s.verifiedEntry(fileSize, &cfg)
			replay = s.timeIndexDamaged()
		case clean:
			// Close sealed it and wrote the recovery point at its end.
			durable = durablePoint{position: fileSize, offset: -1}
			if hasPoint && point.segmentBase == base && point.position == fileSize {
				durable.offset = point.nextOffset
			}
			from = s.verifiedEntry(fileSize, &cfg)
			replay = s.timeIndexDamaged()
		case hasPoint && base == point.segmentBase && point.position <= fileSize:
			durable = durablePoint{position: point.position, offset: point.nextOffset, checkpoint: true}
			from = s.verifiedEntry(point.position, &cfg)
			// The two index files are written separately and not fsynced: after a machine crash
			// the time index may lack entries the offset index has. The point says how many it
			// held when the point was written; only a time index that lost some is replayed.
			replay = !point.timeIndexIntact(s)
		default:
			// Nothing of the active segment is known to be durable: all of it may be a torn tail.
			durable = durablePoint{offset: -1}
			from = index.OffsetEntry{Offset: base}
			if hasPoint && point.segmentBase >= base {
				logger.Warn("segment: recovery point names data beyond the log; ignored", "dir", dir,
					"segment", point.segmentBase, "position", point.position, "file_size", fileSize)
			}
		}
		if replay {
			if err := s.replayTimes(from); err != nil {
				from = index.OffsetEntry{Offset: base} // the data below from is damaged too: rescan it all
			}
		}
		report, err := s.recover(from, durable, nil, &cfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		for _, d := range report.damage {
			logger.Error("segment: damaged data found below the durable point; kept in place, its offsets fail reads with CORRUPT_MESSAGE",
				"dir", dir, "segment", base, "damage", d.String())
		}
		if report.staleCheckpoint {
			logger.Error("segment: recovery point claims data that is not on disk; recovered from the data instead",
				"dir", dir, "segment", base, "position", point.position, "next_offset", point.nextOffset)
		}
		if i == len(bases)-1 && s.size() < fileSize && !s.allZero(s.size(), min(fileSize, s.size()+batch.HeaderSize)) {
			logger.Warn("segment: cut a torn tail after a crash", "dir", dir, "segment", base,
				"position", s.size(), "next_offset", s.nextOffset(), "bytes", fileSize-s.size())
		}
	}
	// Shape the files: sealed segments trimmed (they already are, unless an older version left
	// them otherwise), the active one cut to its logical end, dropping a torn tail.
	for i, s := range segments {
		if i < len(segments)-1 {
			// Rolling trimmed and synced each sealed segment whole before the next one existed, so
			// after a clean close or a crash alike only one recovery changed is sealed again: one
			// with an untrimmed file, or index entries it rebuilt (which would otherwise be lost
			// again, and a later clean open would trust the shorter index left on disk). Resealing
			// every one would cost three fsyncs per segment on each start.
			if s.allocated != s.size() || s.offsets.Unwritten() || s.times.Unwritten() {
				err = s.seal()
			}
		} else {
			err = s.reopenActive(&cfg)
		}
		if err != nil {
			closeAll()
			return nil, err
		}
	}
	l.view.Store(&logView{segments: segments, logStartOffset: loadLogStart(dir, segments[0])}) // log_start.go
	active := segments[len(segments)-1]
	// Recovered bytes may sit only in the page cache: make them durable before claiming them.
	if err := active.sync(); err != nil {
		closeAll()
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		closeAll()
		return nil, fmt.Errorf("segment: remove clean marker in %s: %w", dir, err)
	}
	if err := syncDir(dir); err != nil {
		closeAll()
		return nil, err
	}
	// Recovery may have rebuilt index entries the files do not hold yet: the time index is unknown.
	l.writeRecoveryPoint(recoveryPoint{segmentBase: active.baseOffset, position: active.size(), nextOffset: active.nextOffset(), timeEntries: unknownTimeIndex}, false)
	l.flush.start(l, active.nextOffset())
	return l, nil
}

// listSegments returns the base offsets of the data files in dir, sorted, and removes index files
// whose data file is gone. Other files are left alone.
func listSegments(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment: list %s: %w", dir, err)
	}
	var bases []int64
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	for name := range names {
		for _, suffix := range []string{offsetSuffix, timeSuffix} {
			if stem, ok := strings.CutSuffix(name, suffix); ok {
				if _, isSegment := parseSegmentName(stem + dataSuffix); isSegment && !names[stem+dataSuffix] {
					os.Remove(filepath.Join(dir, name))
				}
			}
		}
	}
	slices.Sort(bases)
	return bases, nil
}

func readRecoveryPoint(dir string) (recoveryPoint, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, recoveryPointFile))
	if err != nil || (len(raw) != recoveryPointSize && len(raw) != legacyRecoveryPointSize) {
		return recoveryPoint{}, false
	}
	if crc32.Checksum(raw[:24], castagnoli) != binary.BigEndian.Uint32(raw[24:]) {
		return recoveryPoint{}, false
	}
	p := recoveryPoint{
		segmentBase: int64(binary.BigEndian.Uint64(raw)),
		position:    int64(binary.BigEndian.Uint64(raw[8:])),
		nextOffset:  int64(binary.BigEndian.Uint64(raw[16:])),
		timeEntries: unknownTimeIndex,
	}
	// A time index part that does not check out (a torn write) leaves the point itself usable.
	if len(raw) == recoveryPointSize && crc32.Checksum(raw[:52], castagnoli) == binary.BigEndian.Uint32(raw[52:]) {
		p.timeEntries = int64(binary.BigEndian.Uint64(raw[28:]))
		p.lastTime.Timestamp = int64(binary.BigEndian.Uint64(raw[36:]))
		p.lastTime.Offset = int64(binary.BigEndian.Uint64(raw[44:]))
	}
	return p, true
}

// writeRecoveryPoint overwrites the recovery point in place. It is written after the fsync that made
// it true and is usually not itself fsynced: a lost or torn write only leaves an older point, which
// makes the next recovery scan more. Where an older point would claim more than the log holds (after
// Truncate) or the point is needed to find the log's end (Close), durable fsyncs it; a failure there
// is returned.
func (l *Log) writeRecoveryPoint(p recoveryPoint, durable bool) error {
	var raw [recoveryPointSize]byte
	binary.BigEndian.PutUint64(raw[:], uint64(p.segmentBase))
	binary.BigEndian.PutUint64(raw[8:], uint64(p.position))
	binary.BigEndian.PutUint64(raw[16:], uint64(p.nextOffset))
	binary.BigEndian.PutUint32(raw[24:], crc32.Checksum(raw[:24], castagnoli))
	binary.BigEndian.PutUint64(raw[28:], uint64(p.timeEntries))
	binary.BigEndian.PutUint64(raw[36:], uint64(p.lastTime.Timestamp))
	binary.BigEndian.PutUint64(raw[44:], uint64(p.lastTime.Offset))
	binary.BigEndian.PutUint32(raw[52:], crc32.Checksum(raw[:52], castagnoli))
	path := filepath.Join(l.dir, recoveryPointFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("segment: write %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteAt(raw[:], 0); err != nil {
		return fmt.Errorf("segment: write %s: %w", path, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("segment: fsync %s: %w", path, err)
		}
	}
	return nil
}

func markClean(dir string) error {
	f, err := os.Create(filepath.Join(dir, cleanShutdownFile))
	if err != nil {
		return fmt.Errorf("segment: mark %s clean: %w", dir, err)
	}
	err = errors.Join(f.Sync(), f.Close())
	if err != nil {
		return fmt.Errorf("segment: mark %s clean: %w", dir, err)
	}
	return syncDir(dir)
}
