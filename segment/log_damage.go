package segment

import (
	"errors"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/index"
)

// FirstDamagedOffset returns the first offset of the earliest damaged range the log holds (ranges
// recovery found invalid below a durable point and kept in place; reads of them get ErrCorrupt),
// and whether there is one. Replication truncates a follower's log there, so that it fetches the
// damaged records again from an intact copy.
func (l *Log) FirstDamagedOffset() (int64, bool) {
	for _, s := range l.segmentList() {
		if e := s.loadExtent(); len(e.damage) > 0 {
			return e.damage[0].firstOffset, true
		}
	}
	return 0, false
}

// isDamage reports whether a read error means the bytes on disk do not hold valid batches.
func isDamage(err error) bool {
	return errors.Is(err, batch.ErrCorrupt) || errors.Is(err, batch.ErrTruncated) || errors.Is(err, batch.ErrUnsupportedMagic)
}

// cutBeforeDamage is where Truncate(offset) cuts a run whose batch headers stop checking out before
// offset's batch: walking the headers from floor (the start of the run: no index needed), the start
// of offset's batch or of the first header that does not check out (or breaks the dense offsets),
// whichever comes first, and the offset a batch there would have. Everything before it was read as
// whole headers with dense offsets.
func (s *segment) cutBeforeDamage(r *headerReader, floor index.OffsetEntry, offset int64) (position, nextOffset int64) {
	position, next := floor.Position, floor.Offset
	for {
		h, err := r.at(position)
		if err != nil || h.BaseOffset != next || h.LastOffset() >= offset {
			return position, next
		}
		position += int64(h.Size())
		next = h.NextOffset()
	}
}
