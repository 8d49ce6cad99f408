package group

import (
	"fmt"
	"time"
)

// State is a group's state, with Kafka's names.
type State uint8

const (
	// Empty: no members; committed offsets may exist.
	Empty State = iota
	// PreparingRebalance: the join phase; members must (re)send JoinGroup.
	PreparingRebalance
	// CompletingRebalance: JoinGroup answered; waiting for the leader's SyncGroup.
	CompletingRebalance
	// Stable: every member has its assignment.
	Stable
	// Dead: deleted; the caller forgets the group.
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ParseState returns the State named name (Kafka's names, as in ListGroups' states filter).
func ParseState(name string) (State, bool) {
	for s := Empty; s <= Dead; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// allowedTransitions is the whole state machine: from each state, the states it may move to.
var allowedTransitions = [...][]State{
	Empty:               {PreparingRebalance, Dead},
	PreparingRebalance:  {CompletingRebalance, Empty, Dead},
	CompletingRebalance: {Stable, PreparingRebalance, Dead},
	Stable:              {PreparingRebalance, Dead},
	Dead:                {},
}

// transition is the only place the state changes.
func (g *Group) transition(to State) {
	for _, allowed := range allowedTransitions[g.state] {
		if allowed == to {
			g.state = to
			if to != Empty {
				g.emptyUntil = time.Time{}
			}
			return
		}
	}
	panic(fmt.Sprintf("group %q: transition %s -> %s is not in the state table", g.id, g.state, to))
}
