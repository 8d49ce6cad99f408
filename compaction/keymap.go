package compaction

import "hash/maphash"

// keyMap maps record keys to the offset of their latest record in the dirty section, in a fixed
// amount of memory: an open-addressing table of 128-bit key hashes (two independent 64-bit seeds;
// a collision between two live keys of one log is not a practical concern at that width) and
// offsets, filled to at most maxLoad. It never grows: put reports false when it is full and the
// cleaner ends the dirty section it cleans there.
//
// Invariant: used <= limit < len(slots); a slot is empty iff its hash is zero.
type keyMap struct {
	seedLow, seedHigh maphash.Seed
	slots             []keySlot
	used, limit       int
}

type keySlot struct {
	low, high uint64
	offset    int64
}

// keySlotBytes is the memory one slot takes.
const keySlotBytes = 24

// maxLoad is the fraction of slots the map fills before it reports full.
const maxLoad = 0.9

// newKeyMap makes a map taking about memoryBytes (at least a few slots).
func newKeyMap(memoryBytes int64) *keyMap {
	n := max(int(memoryBytes/keySlotBytes), 16)
	return &keyMap{seedLow: maphash.MakeSeed(), seedHigh: maphash.MakeSeed(), slots: make([]keySlot, n), limit: int(float64(n) * maxLoad)}
}

// reset empties the map for another pass, keeping its memory.
func (m *keyMap) reset() {
	clear(m.slots)
	m.used = 0
}

// Capacity is the number of keys the map holds when full.
func (m *keyMap) capacity() int { return m.limit }

func (m *keyMap) hash(key []byte) (uint64, uint64) {
	low, high := maphash.Bytes(m.seedLow, key), maphash.Bytes(m.seedHigh, key)
	if low == 0 && high == 0 {
		low = 1
	}
	return low, high
}

func (m *keyMap) find(low, high uint64) *keySlot {
	i := int(low % uint64(len(m.slots)))
	for {
		s := &m.slots[i]
		if (s.low == low && s.high == high) || (s.low == 0 && s.high == 0) {
			return s
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

// put records offset as the latest for key. It returns false, changing nothing, when key is new
// and the map is full.
func (m *keyMap) put(key []byte, offset int64) bool {
	low, high := m.hash(key)
	s := m.find(low, high)
	if s.low == 0 && s.high == 0 {
		if m.used >= m.limit {
			return false
		}
		m.used++
		s.low, s.high = low, high
	}
	s.offset = offset
	return true
}

// get returns the latest offset recorded for key, or -1.
func (m *keyMap) get(key []byte) int64 {
	low, high := m.hash(key)
	s := m.find(low, high)
	if s.low == 0 && s.high == 0 {
		return -1
	}
	return s.offset
}
