package broker

// Topic ids (KIP-516): Produce v13+ and Fetch v13+ name topics by id instead of by name. The
// registry resolves an id against its current snapshot through an index built once per snapshot.

import (
	"sync/atomic"
)

// topicIDIndex maps topic ids to names for one registry snapshot.
type topicIDIndex struct {
	// snapshot is the registry map the index was built from; a newer snapshot rebuilds it.
	snapshot *map[string]*topicState
	names    map[[16]byte]string
}

// topicIDs caches the index of the latest snapshot seen.
type topicIDs struct {
	index atomic.Pointer[topicIDIndex]
}

// topicName returns the name of the local topic with id, and false if there is none (a zero id
// names no topic).
func (r *registry) topicName(id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return "", false
	}
	snapshot := r.topics.Load()
	index := r.topicIDs.index.Load()
	if index == nil || index.snapshot != snapshot {
		index = &topicIDIndex{snapshot: snapshot, names: make(map[[16]byte]string, len(*snapshot))}
		for name, t := range *snapshot {
			index.names[t.meta.ID] = name
		}
		r.topicIDs.index.Store(index)
	}
	name, ok := index.names[id]
	return name, ok
}
