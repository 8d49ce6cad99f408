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

// listGroupsOfNewKinds lists the share groups for ListGroups (types "share"; v5 names the type)
// and removes their ids from the classic summaries (where committed offsets alone would list them).
func (b *Broker) listGroupsOfNewKinds(req *kmsg.ListGroupsRequest, summaries map[string]groupSummary) []kmsg.ListGroupsResponseGroup {
	var out []kmsg.ListGroupsResponseGroup
	state := b.coordinator.GroupState()
	ids := map[string]bool{}
	for _, id := range state.Groups() {
		if record, ok := state.Record(id); ok && record.Type == coordinator.GroupTypeShare {
			ids[id] = true
		}
	}
	m := b.shares
	m.mu.Lock()
	states := map[string]string{}
	for id, e := range m.mu.groups {
		ids[id] = true
		states[id] = e.group.State()
	}
	m.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		delete(summaries, id)
		groupState := states[id]
		if groupState == "" {
			groupState = "Empty"
		}
		if !listWanted(req.TypesFilter, "share") || !listWanted(req.StatesFilter, groupState) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = id, "share", groupState, "share"
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
