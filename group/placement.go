package group

import "hash/fnv"

// CoordinatorFor picks the broker that coordinates groupID among brokers (the live ones) by
// rendezvous hashing: every broker scores hash(groupID, broker) and the highest score wins, so when a
// broker leaves only its own groups move, each to the broker that scored next. It returns -1 for no
// brokers. Pure: every node computes the same answer from the same broker set.
func CoordinatorFor(groupID string, brokers []int32) int32 {
	h := fnv.New64a()
	h.Write([]byte(groupID))
	key := h.Sum64()
	best, bestScore := int32(-1), uint64(0)
	for _, id := range brokers {
		score := mix(key ^ (uint64(uint32(id)) * 0x9e3779b97f4a7c15))
		if best < 0 || score > bestScore || (score == bestScore && id < best) {
			best, bestScore = id, score
		}
	}
	return best
}

// mix is splitmix64's finalizer: it spreads FNV's nearby values over the whole range.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
