package broker

// A group id names one kind of group: classic (JoinGroup/SyncGroup), share (KIP-932) or consumer
// (KIP-848). Requests of one kind for a group of another are refused as Kafka refuses them: the
// new protocols' heartbeats with GROUP_ID_NOT_FOUND, a classic JoinGroup with
// INCONSISTENT_GROUP_PROTOCOL.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"

	"github.com/sluice-mq/sluice/protocol"
)

type groupKind int

const (
	groupKindClassic groupKind = iota
	groupKindShare
	groupKindConsumer
)

func (k groupKind) String() string {
	switch k {
	case groupKindShare:
		return "share"
	case groupKindConsumer:
		return "consumer"
	}
	return "classic"
}

// groupKindOf is the kind of an existing group id, and false when no group of any kind has it.
func (b *Broker) groupKindOf(id string) (groupKind, bool) {
	if b.shares.knownShareGroup(id) {
		return groupKindShare, true
	}
	if b.consumerGroups.known(id) {
		return groupKindConsumer, true
	}
	if len(b.groups.describe([]string{id})) > 0 {
		return groupKindClassic, true
	}
	return 0, false
}

// groupTypeConflict refuses a request of kind for a group of another kind.
func (b *Broker) groupTypeConflict(id string, kind groupKind) error {
	existing, ok := b.groupKindOf(id)
	if !ok || existing == kind {
		return nil
	}
	code := protocol.GroupIDNotFound
	if kind == groupKindClassic {
		code = protocol.InconsistentGroupProtocol
	}
	return fmt.Errorf("broker: group %q is a %s group, not a %s group: %w", id, existing, kind, code)
}

// listGroupsOfNewKinds lists the share and KIP-848 consumer groups for ListGroups (v5 names their
// type) and removes their ids from the classic summaries (where committed offsets alone would list
// them as classic).
func (b *Broker) listGroupsOfNewKinds(req *kmsg.ListGroupsRequest, summaries map[string]groupSummary) []kmsg.ListGroupsResponseGroup {
	type entry struct{ kind, state string }
	entries := map[string]entry{}
	state := b.coordinator.GroupState()
	for _, id := range state.Groups() {
		if record, ok := state.Record(id); ok {
			entries[id] = entry{record.Type, "Empty"}
		}
	}
	m := b.shares
	m.mu.Lock()
	for id, e := range m.mu.groups {
		entries[id] = entry{coordinator.GroupTypeShare, e.group.State()}
	}
	m.mu.Unlock()
	c := b.consumerGroups
	c.mu.Lock()
	for id, g := range c.mu.groups {
		entries[id] = entry{coordinator.GroupTypeConsumer, g.State()}
	}
	c.mu.Unlock()
	var out []kmsg.ListGroupsResponseGroup
	for _, id := range slices.Sorted(maps.Keys(entries)) {
		e := entries[id]
		delete(summaries, id)
		if !listWanted(req.TypesFilter, e.kind) || !listWanted(req.StatesFilter, e.state) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = id, e.kind, e.state, e.kind
		out = append(out, rg)
	}
	return out
}

// listWanted reports whether value passes a ListGroups filter (empty: everything; case-insensitive).
func listWanted(filter []string, value string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(f, value) {
			return true
		}
	}
	return false
}
