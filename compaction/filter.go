package compaction

import (
	"encoding/binary"

	"github.com/sluice-mq/sluice/batch"
)

// filter decides what of each batch a pass keeps. Per record, as Kafka's cleaner:
//   - a record with no key goes (compacted topics refuse them; older ones predate the policy);
//   - a record whose key has a later record in the dirty section (the key map) goes;
//   - a tombstone goes once the pass that first cleaned it is DeleteRetention old;
//   - every other record stays, byte for byte.
//
// Per batch: control and transactional batches stay whole (transactions are not compacted here); a
// batch keeping all its records stays as it is; one keeping some is rewritten with the same header
// (offsets, timestamps, producer fields, codec) and fewer records; one keeping none goes, unless it is
// the last batch of its producer, whose header then stays with no records so that the producer's
// last offset and sequence survive (Kafka does the same).
type filter struct {
	cleaner    *Cleaner
	keys       *keyMap
	checkpoint checkpoint
	firstDirty int64
	// lastBatches is the base offset of each producer's last batch in the dirty section.
	lastBatches     map[int64]int64
	nowMs           int64
	deleteRetention int64 // ms
	kept            []byte
}

// batch returns what stays of the batch raw (whose header is h): raw itself, a rewritten batch, or
// nil when nothing stays.
func (f *filter) batch(h batch.Header, raw []byte) ([]byte, error) {
	if h.IsControl() || h.IsTransactional() {
		return raw, nil
	}
	records, err := f.cleaner.codecs.batchRecords(h, raw)
	if err != nil {
		return nil, err
	}
	f.kept = f.kept[:0]
	keptCount, total := 0, 0
	err = parseRecords(records, int(h.RecordCount), func(r record) error {
		total++
		if f.keep(h.BaseOffset+r.offsetDelta, r) {
			f.kept = append(f.kept, r.raw...)
			keptCount++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case keptCount == total:
		return raw, nil
	case keptCount == 0 && h.ProducerID >= 0 && f.lastOfProducer(h):
		return appendEmptyBatch(nil, h.BaseOffset, h.LastOffsetDelta, h.PartitionLeaderEpoch, h.Attributes&^batch.AttributeCodecMask,
			h.BaseTimestamp, h.MaxTimestamp, h.ProducerID, h.ProducerEpoch, h.BaseSequence), nil
	case keptCount == 0:
		return nil, nil
	}
	out := append([]byte(nil), raw[:batch.HeaderSize]...)
	out, err = f.cleaner.codecs.compress(out, h.Codec(), f.kept, h.Codec() == batch.CodecSnappy && len(raw) > batch.HeaderSize+16 &&
		string(raw[batch.HeaderSize:batch.HeaderSize+8]) == string(xerialPrefix))
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-batch.LengthPrefix))
	binary.BigEndian.PutUint32(out[57:], uint32(keptCount))
	batch.SetCRC(out)
	return out, nil
}

func (f *filter) keep(offset int64, r record) bool {
	if r.key == nil {
		return false
	}
	if latest := f.keys.get(r.key); latest > offset {
		return false
	}
	if r.tombstone {
		if at, cleaned := f.checkpoint.cleanedAt(offset); cleaned && f.nowMs-at >= f.deleteRetention {
			return false
		}
	}
	return true
}

// lastOfProducer reports whether an emptied batch must keep its header: the last batch of its
// producer in the dirty section, or, for a producer the dirty section does not hold, any batch before
// it (at most one per producer survives there, as later passes drop the earlier ones).
func (f *filter) lastOfProducer(h batch.Header) bool {
	last, seen := f.lastBatches[h.ProducerID]
	if seen {
		return last == h.BaseOffset
	}
	return true
}
