package broker

import (
	"math"
	"testing"
)

// entryOf builds a known producer entry at epoch from (firstSequence, lastSequence) pairs, oldest
// first; batch i got offsets starting at 100*i.
func entryOf(epoch int16, sequences ...[2]int32) producerEntry {
	var e producerEntry
	e.epoch = epoch
	for i, s := range sequences {
		e.batches[i] = appendedBatch{firstSequence: s[0], lastSequence: s[1], baseOffset: int64(100 * i), lastOffset: int64(100*i) + int64(s[1]-s[0])}
	}
	e.count = len(sequences)
	return e
}

func TestAddSequenceWraps(t *testing.T) {
	for _, tc := range []struct{ sequence, increment, want int32 }{
		{0, 0, 0},
		{0, 9, 9},
		{math.MaxInt32 - 1, 1, math.MaxInt32},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 2, 5, 2},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32 - 1},
	} {
		if got := addSequence(tc.sequence, tc.increment); got != tc.want {
			t.Errorf("addSequence(%d, %d) = %d, want %d", tc.sequence, tc.increment, got, tc.want)
		}
	}
	if !followsSequence(math.MaxInt32, 0) || !followsSequence(4, 5) || followsSequence(4, 4) || followsSequence(4, 6) ||
		followsSequence(math.MaxInt32, math.MinInt32) {
		t.Error("followsSequence")
	}
}

func TestCheckSequenceRules(t *testing.T) {
	known := entryOf(3, [2]int32{0, 4}, [2]int32{5, 9}, [2]int32{10, 10})
	check := func(name string, entry producerEntry, isKnown bool, epoch int16, first, count int32, want sequenceVerdict) appendedBatch {
		t.Helper()
		got, original := checkSequence(entry, isKnown, batchSequence{producerID: 7, epoch: epoch, firstSequence: first, lastOffsetDelta: count - 1})
		if got != want {
			t.Errorf("%s: verdict %v, want %v", name, got, want)
		}
		return original
	}
	// Rule 1: negative sequences are invalid, known producer or not, whatever else.
	check("negative, unknown", producerEntry{}, false, 0, -1, 1, sequenceInvalid)
	check("negative, known", known, true, 3, -5, 1, sequenceInvalid)
	check("negative, fenced epoch", known, true, 1, math.MinInt32, 1, sequenceInvalid)
	// Rule 2: an unknown producer starts wherever it is.
	check("unknown at 0", producerEntry{}, false, 0, 0, 1, sequenceAppend)
	check("unknown mid-stream", producerEntry{}, false, 9, 12345, 10, sequenceAppend)
	check("unknown at max", producerEntry{}, false, math.MaxInt16, math.MaxInt32, 3, sequenceAppend)
	// Rule 3: lower epochs are fenced, even when their sequence would fit or repeat a batch.
	check("lower epoch, next sequence", known, true, 2, 11, 1, sequenceFenced)
	check("lower epoch, repeated batch", known, true, 2, 5, 5, sequenceFenced)
	check("lower epoch at 0", known, true, 0, 0, 1, sequenceFenced)
	check("negative epoch", known, true, -1, 11, 1, sequenceFenced)
	// Rule 4: duplicates of the remembered batches, at the known epoch.
	for i, s := range [][2]int32{{0, 4}, {5, 9}, {10, 10}} {
		original := check("duplicate", known, true, 3, s[0], s[1]-s[0]+1, sequenceDuplicate)
		if original != known.batches[i] {
			t.Errorf("duplicate of batch %d answered %+v, want %+v", i, original, known.batches[i])
		}
	}
	check("same first, other last", known, true, 3, 5, 4, sequenceOutOfOrder)
	check("same last, other first", known, true, 3, 6, 4, sequenceOutOfOrder)
	check("spanning two batches", known, true, 3, 0, 10, sequenceOutOfOrder)
	// A repeated batch at a new epoch is not a duplicate: the new epoch must start at 0.
	check("repeat at higher epoch", known, true, 4, 5, 5, sequenceOutOfOrder)
	// Rule 5: a higher epoch starts at 0.
	check("higher epoch at 0", known, true, 4, 0, 3, sequenceAppend)
	check("much higher epoch at 0", known, true, math.MaxInt16, 0, 1, sequenceAppend)
	check("higher epoch continuing", known, true, 4, 11, 1, sequenceOutOfOrder)
	check("higher epoch at 1", known, true, 4, 1, 1, sequenceOutOfOrder)
	// Rule 6: at the known epoch the first sequence follows the last.
	check("next", known, true, 3, 11, 1, sequenceAppend)
	check("next, long", known, true, 3, 11, 1000, sequenceAppend)
	check("gap", known, true, 3, 12, 1, sequenceOutOfOrder)
	check("overlap", known, true, 3, 10, 2, sequenceOutOfOrder)
	check("back to 0", known, true, 3, 0, 1, sequenceOutOfOrder)
	check("far behind", known, true, 3, 3, 1, sequenceOutOfOrder)
	// Only five batches are remembered: the evicted oldest is out of order, not a duplicate.
	full := entryOf(1, [2]int32{0, 0}, [2]int32{1, 1}, [2]int32{2, 2}, [2]int32{3, 3}, [2]int32{4, 4})
	full = full.withAppended(true, batchSequence{epoch: 1, firstSequence: 5}, 500)
	check("evicted", full, true, 1, 0, 1, sequenceOutOfOrder)
	check("oldest remembered", full, true, 1, 1, 1, sequenceDuplicate)
	check("newest remembered", full, true, 1, 5, 1, sequenceDuplicate)
	// Wrapping at MaxInt32.
	atMax := entryOf(0, [2]int32{math.MaxInt32 - 4, math.MaxInt32})
	check("wrap to 0", atMax, true, 0, 0, 5, sequenceAppend)
	check("no wrap to 1", atMax, true, 0, 1, 5, sequenceOutOfOrder)
	check("duplicate at the top", atMax, true, 0, math.MaxInt32-4, 5, sequenceDuplicate)
	wrapped := entryOf(0, [2]int32{math.MaxInt32 - 1, 2})
	check("after a wrapping batch", wrapped, true, 0, 3, 1, sequenceAppend)
	check("duplicate of a wrapping batch", wrapped, true, 0, math.MaxInt32-1, 5, sequenceDuplicate)
}

// referenceVerdict is the rules of producer_sequence.go restated over the whole history of the
// producer's batches at its epoch, with sequences as int64 modulo 2^31: the model the compact entry
// (five batches, wrapping int32 arithmetic) must agree with.
func referenceVerdict(history []batchSequence, b batchSequence) sequenceVerdict {
	const modulus = int64(math.MaxInt32) + 1
	if b.firstSequence < 0 {
		return sequenceInvalid
	}
	if len(history) == 0 {
		return sequenceAppend
	}
	last := history[len(history)-1]
	if b.epoch < last.epoch {
		return sequenceFenced
	}
	if b.epoch > last.epoch {
		if b.firstSequence == 0 {
			return sequenceAppend
		}
		return sequenceOutOfOrder
	}
	lastOf := func(s batchSequence) int64 { return (int64(s.firstSequence) + int64(s.lastOffsetDelta)) % modulus }
	start := max(0, len(history)-rememberedBatches)
	for _, h := range history[start:] {
		if h.epoch == b.epoch && h.firstSequence == b.firstSequence && lastOf(h) == lastOf(b) {
			return sequenceDuplicate
		}
	}
	if (lastOf(last)+1)%modulus != int64(b.firstSequence) {
		return sequenceOutOfOrder
	}
	return sequenceAppend
}

// TestCheckSequenceAgainstReference walks every short sequence of batches over a small domain of
// epochs, starting sequences (near 0 and near MaxInt32) and lengths, and compares verdicts and
// duplicate offsets with the reference.
func TestCheckSequenceAgainstReference(t *testing.T) {
	starts := []int32{0, 1, 2, 3, 4, 5, 6, math.MaxInt32 - 2, math.MaxInt32 - 1, math.MaxInt32, -1}
	var candidates []batchSequence
	for epoch := int16(0); epoch <= 2; epoch++ {
		for _, first := range starts {
			for delta := int32(0); delta <= 2; delta++ {
				candidates = append(candidates, batchSequence{producerID: 1, epoch: epoch, firstSequence: first, lastOffsetDelta: delta})
			}
		}
	}
	checked := 0
	var walk func(entry producerEntry, known bool, history []batchSequence, offsets []int64, nextOffset int64, depth int)
	walk = func(entry producerEntry, known bool, history []batchSequence, offsets []int64, nextOffset int64, depth int) {
		for _, b := range candidates {
			got, original := checkSequence(entry, known, b)
			want := referenceVerdict(history, b)
			checked++
			if got != want {
				t.Fatalf("history %+v, batch %+v: verdict %v, want %v", history, b, got, want)
			}
			if got == sequenceDuplicate {
				found := false
				for i := len(history) - 1; i >= 0; i-- {
					if history[i].firstSequence == b.firstSequence && offsets[i] == original.baseOffset {
						found = true
					}
				}
				if !found || original.lastOffset-original.baseOffset != int64(b.lastOffsetDelta) {
					t.Fatalf("history %+v, batch %+v: duplicate of %+v, not a batch of the history", history, b, original)
				}
			}
			if got != sequenceAppend || depth == 0 {
				continue
			}
			nextHistory := append([]batchSequence(nil), history...)
			nextOffsets := append([]int64(nil), offsets...)
			if known && b.epoch != entry.epoch {
				nextHistory, nextOffsets = nil, nil // a new epoch starts over
			}
			walk(entry.withAppended(known, b, nextOffset), true, append(nextHistory, b), append(nextOffsets, nextOffset),
				nextOffset+int64(b.lastOffsetDelta)+1, depth-1)
		}
	}
	walk(producerEntry{}, false, nil, nil, 0, 3)
	t.Logf("%d verdicts checked", checked)
}

// TestCheckSequenceRememberedWindow appends a long run and checks that exactly the last five batches
// are duplicates, with their offsets.
func TestCheckSequenceRememberedWindow(t *testing.T) {
	var entry producerEntry
	known := false
	var appended []appendedBatch
	sequence, offset := int32(math.MaxInt32-20), int64(0)
	for i := range 20 {
		b := batchSequence{epoch: 2, firstSequence: sequence, lastOffsetDelta: int32(i % 4)}
		if verdict, _ := checkSequence(entry, known, b); verdict != sequenceAppend {
			t.Fatalf("batch %d: %v", i, verdict)
		}
		entry, known = entry.withAppended(known, b, offset), true
		appended = append(appended, appendedBatch{firstSequence: b.firstSequence, lastSequence: b.lastSequence(), baseOffset: offset, lastOffset: offset + int64(b.lastOffsetDelta)})
		sequence, offset = addSequence(b.lastSequence(), 1), offset+int64(b.lastOffsetDelta)+1
		for j, earlier := range appended {
			verdict, original := checkSequence(entry, true, batchSequence{epoch: 2, firstSequence: earlier.firstSequence,
				lastOffsetDelta: int32(earlier.lastOffset - earlier.baseOffset)})
			remembered := j >= len(appended)-rememberedBatches
			if remembered && (verdict != sequenceDuplicate || original != earlier) {
				t.Fatalf("after %d batches, batch %d: %v %+v, want duplicate of %+v", i+1, j, verdict, original, earlier)
			}
			if !remembered && verdict != sequenceOutOfOrder {
				t.Fatalf("after %d batches, forgotten batch %d: %v", i+1, j, verdict)
			}
		}
	}
	if entry.count != rememberedBatches {
		t.Fatalf("entry holds %d batches", entry.count)
	}
}
