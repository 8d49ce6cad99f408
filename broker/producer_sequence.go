package broker

// The idempotence rules for one partition, as Kafka applies them (ProducerStateManager and
// ProducerAppendInfo): pure functions of what the partition knows about a producer and the header
// of the batch it sends. No I/O, no lock, no clock; producer_state.go holds the state and the lock.
//
// For a batch with producer id >= 0, in this order:
//  1. a negative base sequence is INVALID_RECORD;
//  2. a producer the partition does not know (first write, or state lost: broker restart, eviction)
//     starts its state with this batch, whatever its epoch and sequence (Kafka accepts any sequence
//     from a producer without state, too);
//  3. an epoch below the known one is fenced: INVALID_PRODUCER_EPOCH;
//  4. at the known epoch, a batch with the same first and last sequence as one of the last five
//     appended is a duplicate: success with the offsets it got the first time, nothing appended;
//  5. an epoch above the known one must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
//  6. at the known epoch the first sequence must follow the last appended one (wrapping from
//     MaxInt32 to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER.

import "math"

// rememberedBatches is how many of a producer's last batches a partition keeps for duplicate
// detection. Kafka keeps five, which is why idempotent clients keep at most five requests in flight
// per broker.
const rememberedBatches = 5

// batchSequence is what the rules read from a batch header.
type batchSequence struct {
	producerID      int64
	epoch           int16
	firstSequence   int32
	lastOffsetDelta int32 // records - 1
}

// lastSequence is the sequence of the batch's last record.
func (b batchSequence) lastSequence() int32 { return addSequence(b.firstSequence, b.lastOffsetDelta) }

// addSequence adds a non-negative increment to a sequence, wrapping past MaxInt32 to 0 as Kafka's
// DefaultRecordBatch.incrementSequence does.
func addSequence(sequence, increment int32) int32 {
	if sequence > math.MaxInt32-increment {
		return increment - (math.MaxInt32 - sequence) - 1
	}
	return sequence + increment
}

// followsSequence reports whether next is the sequence right after last.
func followsSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (last == math.MaxInt32 && next == 0)
}

// appendedBatch is one batch of a producer that the partition appended.
type appendedBatch struct {
	firstSequence int32
	lastSequence  int32
	baseOffset    int64
	lastOffset    int64
}

// producerEntry is what a partition knows about one producer. It is a value: rules return a new
// one rather than changing it.
type producerEntry struct {
	epoch int16
	// batches are the last appended batches at epoch, oldest first.
	// Invariant: 0 <= count <= rememberedBatches; 0 only for an entry a transaction marker made.
	batches [rememberedBatches]appendedBatch
	count   int
}

// last is the most recently appended batch.
func (e producerEntry) last() appendedBatch { return e.batches[e.count-1] }

// sequenceVerdict is what the rules decide about one batch.
type sequenceVerdict uint8

const (
	sequenceAppend     sequenceVerdict = iota // append it and record it
	sequenceDuplicate                         // answer with the remembered batch's offsets
	sequenceFenced                            // INVALID_PRODUCER_EPOCH
	sequenceOutOfOrder                        // OUT_OF_ORDER_SEQUENCE_NUMBER
	sequenceInvalid                           // INVALID_RECORD
)

func (v sequenceVerdict) String() string {
	switch v {
	case sequenceAppend:
		return "append"
	case sequenceDuplicate:
		return "duplicate"
	case sequenceFenced:
		return "fenced"
	case sequenceOutOfOrder:
		return "out of order"
	case sequenceInvalid:
		return "invalid"
	}
	return "unknown verdict"
}

// checkSequence applies the rules to batch b of a producer the partition knows as entry (known
// false: not at all). For a duplicate it also returns the remembered batch.
func checkSequence(entry producerEntry, known bool, b batchSequence) (sequenceVerdict, appendedBatch) {
	switch {
	case b.firstSequence < 0:
		return sequenceInvalid, appendedBatch{}
	case !known:
		return sequenceAppend, appendedBatch{}
	case b.epoch < entry.epoch:
		return sequenceFenced, appendedBatch{}
	case entry.count == 0:
		// Only a marker is known (partition_txn.go): it fenced older epochs, but the producer's
		// sequence is unknown, as for a producer without state.
		return sequenceAppend, appendedBatch{}
	case b.epoch > entry.epoch:
		if b.firstSequence != 0 {
			return sequenceOutOfOrder, appendedBatch{}
		}
		return sequenceAppend, appendedBatch{}
	}
	last := b.lastSequence()
	for _, remembered := range entry.batches[:entry.count] {
		if remembered.firstSequence == b.firstSequence && remembered.lastSequence == last {
			return sequenceDuplicate, remembered
		}
	}
	if !followsSequence(entry.last().lastSequence, b.firstSequence) {
		return sequenceOutOfOrder, appendedBatch{}
	}
	return sequenceAppend, appendedBatch{}
}

// withAppended returns the entry after appending b (which checkSequence accepted) at baseOffset: a
// new or higher epoch starts over with b alone; otherwise b joins the last batches, the oldest
// dropping out.
func (e producerEntry) withAppended(known bool, b batchSequence, baseOffset int64) producerEntry {
	appended := appendedBatch{
		firstSequence: b.firstSequence,
		lastSequence:  b.lastSequence(),
		baseOffset:    baseOffset,
		lastOffset:    baseOffset + int64(b.lastOffsetDelta),
	}
	if !known || b.epoch != e.epoch {
		return producerEntry{epoch: b.epoch, batches: [rememberedBatches]appendedBatch{appended}, count: 1}
	}
	if e.count == rememberedBatches {
		copy(e.batches[:], e.batches[1:])
		e.count--
	}
	e.batches[e.count] = appended
	e.count++
	return e
}
