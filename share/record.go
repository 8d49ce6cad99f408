package share

import (
	"fmt"
	"time"
)

// RecordState is one in-flight record's state.
type RecordState uint8

const (
	// Available: may be acquired by the next fetch.
	Available RecordState = iota
	// Acquired: locked by its owner until its deadline.
	Acquired
	// Acknowledged: accepted; never delivered again.
	Acknowledged
	// Archived: rejected, out of deliveries, or gone from the log; never delivered again.
	Archived
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "Available"
	case Acquired:
		return "Acquired"
	case Acknowledged:
		return "Acknowledged"
	case Archived:
		return "Archived"
	}
	return fmt.Sprintf("RecordState(%d)", uint8(s))
}

// terminal reports whether a record in this state is done.
func (s RecordState) terminal() bool { return s == Acknowledged || s == Archived }

// allowedTransitions is the record state machine: from each state, the states it may move to.
var allowedTransitions = [...][]RecordState{
	Available:    {Acquired, Archived},
	Acquired:     {Acquired, Acknowledged, Available, Archived},
	Acknowledged: {},
	Archived:     {},
}

// record is one in-flight record.
type record struct {
	state RecordState
	// deliveryCount is how many times the record has been acquired.
	deliveryCount int16
	// owner is the member holding the lock. Invariant: non-empty iff state == Acquired.
	owner string
	// deadline is when the lock ends; meaningful only while Acquired.
	deadline time.Time
}

// transition is the only place a record's state changes.
func (r *record) transition(offset int64, to RecordState) {
	for _, allowed := range allowedTransitions[r.state] {
		if allowed == to {
			r.state = to
			if to != Acquired {
				r.owner = ""
				r.deadline = time.Time{}
			}
			return
		}
	}
	panic(fmt.Sprintf("share: record %d: transition %s -> %s is not in the state table", offset, r.state, to))
}
