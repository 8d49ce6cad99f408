package broker

import (
	"testing"

	"github.com/sluice-mq/sluice/group"
)

// A group whose coordination moved to another broker is forgotten here, so that when it moves
// back it starts from nothing (a new generation) instead of accepting the old generation's
// members (the chaos suite saw committed offsets move back after a coordinator returned).
func TestGroupsThatMovedAreForgotten(t *testing.T) {
	c := newGroupCoordinator(group.DefaultConfig())
	entries := map[string]*groupEntry{}
	for _, id := range []string{"stays", "moves"} {
		e := &groupEntry{id: id}
		e.mu.group = group.New(id, c.config)
		e.mu.joins = map[string]*parkedJoin{}
		e.mu.syncs = map[string]*parkedSync{}
		c.mu.groups[id] = e
		entries[id] = e
	}
	c.dropMoved(func(id string) bool { return id == "stays" })
	c.mu.Lock()
	_, moves := c.mu.groups["moves"]
	_, stays := c.mu.groups["stays"]
	c.mu.Unlock()
	if moves || !stays {
		t.Fatalf("after the move: moved group kept %v, owned group kept %v", moves, stays)
	}
	if !entries["moves"].mu.forgotten || entries["stays"].mu.forgotten {
		t.Fatal("the moved entry must be marked forgotten (requests holding it look again), the owned one not")
	}
}
