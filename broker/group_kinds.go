package broker

// A group id names one kind of group: classic (JoinGroup/SyncGroup), share (KIP-932) or consumer
// (KIP-848). Requests of one kind for a group of another are refused as Kafka refuses them: the
// new protocols' heartbeats with GROUP_ID_NOT_FOUND, a classic JoinGroup with
// INCONSISTENT_GROUP_PROTOCOL.

import (
	"fmt"

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
