package client

// read_committed decoding. A read_committed fetch returns records below the last stable offset
// and lists the aborted transactions overlapping them (producer id, first offset). As Kafka's
// consumers do, the batches are walked in offset order: an aborted transaction becomes active for
// its producer once the walk reaches its first offset, the producer's transactional batches are
// dropped while it is active, and its abort marker ends it.

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/batch"
)

// abortedFilter is the walk's state for one partition answer. A nil filter skips nothing.
type abortedFilter struct {
	pending []kmsg.FetchResponseTopicPartitionAbortedTransaction // sorted by first offset, not yet reached
	active  map[int64]bool                                       // producers inside an aborted transaction
}

func newAbortedFilter(aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction) *abortedFilter {
	pending := slices.Clone(aborted)
	slices.SortFunc(pending, func(a, b kmsg.FetchResponseTopicPartitionAbortedTransaction) int {
		return cmp.Compare(a.FirstOffset, b.FirstOffset)
	})
	return &abortedFilter{pending: pending, active: map[int64]bool{}}
}

// skip reports whether a batch belongs to an aborted transaction (or is its marker, which ends it).
func (f *abortedFilter) skip(h batch.Header, raw []byte) bool {
	if f == nil {
		return false
	}
	for len(f.pending) > 0 && f.pending[0].FirstOffset <= h.LastOffset() {
		f.active[f.pending[0].ProducerID] = true
		f.pending = f.pending[1:]
	}
	if !h.IsTransactional() || !f.active[h.ProducerID] {
		return false
	}
	if h.IsControl() && isAbortMarker(raw) {
		delete(f.active, h.ProducerID)
	}
	return true
}

// isAbortMarker reads a control batch's first record key (version int16, type int16; 0 = abort).
func isAbortMarker(raw []byte) bool {
	records := raw[batch.HeaderSize:]
	_, n := binary.Varint(records) // record length
	if n <= 0 || len(records) < n+1 {
		return false
	}
	rest := records[n+1:] // attributes
	for range 2 {         // timestamp delta, offset delta
		_, m := binary.Varint(rest)
		if m <= 0 {
			return false
		}
		rest = rest[m:]
	}
	keyLength, m := binary.Varint(rest)
	if m <= 0 || keyLength < 4 || int64(len(rest)-m) < keyLength {
		return false
	}
	return binary.BigEndian.Uint16(rest[m+2:]) == 0
}
