package group

import (
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// SyncRequest is one SyncGroup request.
type SyncRequest struct {
	MemberID   string
	InstanceID string
	Generation int32
	// ProtocolType and Protocol are checked against the group's when not "" (v5+).
	ProtocolType, Protocol string
	// Assignments is the leader's assignment by member id; ignored from other members.
	Assignments map[string][]byte
}

// SyncResponse answers a SyncGroup.
type SyncResponse struct {
	// Err is nil or wraps a protocol.ErrorCode.
	Err          error
	MemberID     string
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// Sync handles a SyncGroup. Like Join, it answers now (parked=false) or parks the request under
// req.MemberID; the leader's SyncGroup in CompletingRebalance answers every parked one, its own
// included, through out.
func (g *Group) Sync(now time.Time, req SyncRequest) (resp SyncResponse, parked bool, out Outcome) {
	fail := func(err error) (SyncResponse, bool, Outcome) {
		return SyncResponse{Err: err, MemberID: req.MemberID}, false, out
	}
	if g.state == Dead {
		return fail(g.deadError())
	}
	m, err := g.lookupMember(req.MemberID, req.InstanceID)
	if err != nil {
		return fail(err)
	}
	if req.Generation != g.generation {
		return fail(fmt.Errorf("group %q: generation %d, current %d: %w", g.id, req.Generation, g.generation, protocol.IllegalGeneration))
	}
	// In PreparingRebalance no protocol is selected (the generation's was cleared when the
	// rebalance began): a member naming its generation's protocol is told to rejoin below, as
	// Kafka does, not refused for good.
	if req.ProtocolType != "" && req.ProtocolType != g.protocolType || req.Protocol != "" && g.protocol != "" && req.Protocol != g.protocol {
		return fail(fmt.Errorf("group %q: protocol %s/%s, the group's is %s/%s: %w", g.id, req.ProtocolType, req.Protocol,
			g.protocolType, g.protocol, protocol.InconsistentGroupProtocol))
	}
	m.lastHeard = now
	switch g.state {
	case PreparingRebalance:
		return fail(fmt.Errorf("group %q: %w", g.id, protocol.RebalanceInProgress))
	case Stable:
		return g.syncAnswer(m), false, out
	case CompletingRebalance:
		m.awaitingSync = true
		if m.ID == g.leader {
			for id, assignment := range req.Assignments {
				if member, ok := g.members[id]; ok {
					member.Assignment = assignment
				}
			}
			g.transition(Stable)
			g.syncDeadline = time.Time{}
			for _, member := range g.orderedMembers() {
				if member.awaitingSync {
					member.awaitingSync = false
					member.lastHeard = now
					out.sync(g.syncAnswer(member))
				}
			}
		}
		return SyncResponse{MemberID: m.ID}, true, out
	}
	panic(fmt.Sprintf("group %q: member %q exists in state %s", g.id, m.ID, g.state))
}

func (g *Group) syncAnswer(m *Member) SyncResponse {
	return SyncResponse{MemberID: m.ID, ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.Assignment}
}

// Heartbeat handles a Heartbeat: nil, or an error wrapping the protocol.ErrorCode to answer
// (REBALANCE_IN_PROGRESS tells the member to rejoin).
func (g *Group) Heartbeat(now time.Time, memberID, instanceID string, generation int32) error {
	if g.state == Dead {
		return g.deadError()
	}
	m, err := g.lookupMember(memberID, instanceID)
	if err != nil {
		return err
	}
	if generation != g.generation {
		return fmt.Errorf("group %q: generation %d, current %d: %w", g.id, generation, g.generation, protocol.IllegalGeneration)
	}
	m.lastHeard = now
	if g.state == PreparingRebalance {
		return fmt.Errorf("group %q: %w", g.id, protocol.RebalanceInProgress)
	}
	return nil
}

// LeavingMember names a member in a LeaveGroup: by member id, or (v3+) by instance id with an
// optional member id.
type LeavingMember struct {
	MemberID   string
	InstanceID string
}

// Leave removes members. errs[i] answers members[i] (nil, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).
// Removing a member ends the current generation; the remaining members rebalance.
func (g *Group) Leave(now time.Time, members []LeavingMember) (errs []error, out Outcome) {
	errs = make([]error, len(members))
	removed := false
	for i, leaving := range members {
		if g.state == Dead {
			errs[i] = g.deadError()
			continue
		}
		id := leaving.MemberID
		if leaving.InstanceID != "" {
			current, ok := g.staticMembers[leaving.InstanceID]
			switch {
			case !ok:
				errs[i] = fmt.Errorf("group %q: no instance %q: %w", g.id, leaving.InstanceID, protocol.UnknownMemberID)
				continue
			case id != "" && id != current:
				errs[i] = fmt.Errorf("group %q: instance %q is member %q, not %q: %w", g.id, leaving.InstanceID, current, id, protocol.FencedInstanceID)
				continue
			}
			id = current
		}
		if _, pending := g.pendingMembers[id]; pending {
			delete(g.pendingMembers, id)
			removed = true
			continue
		}
		if _, ok := g.members[id]; !ok {
			errs[i] = fmt.Errorf("group %q: no member %q: %w", g.id, id, protocol.UnknownMemberID)
			continue
		}
		g.removeMember(id, nil, &out)
		removed = true
	}
	if removed {
		g.afterRemoval(now, &out)
	}
	return errs, out
}

// CheckCommit decides whether an OffsetCommit from this member may be stored: nil, or an error
// wrapping UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS or
// COORDINATOR_NOT_AVAILABLE. Generation -1 without member id is a "simple" commit, allowed only
// while the group has no members. A commit counts as a sign of life. Commits in
// PreparingRebalance with the current generation are allowed: members commit before rejoining.
func (g *Group) CheckCommit(now time.Time, memberID, instanceID string, generation int32) error {
	if g.state == Dead {
		return g.deadError()
	}
	if generation < 0 && memberID == "" && instanceID == "" && len(g.members) == 0 {
		return nil
	}
	m, err := g.lookupMember(memberID, instanceID)
	if err != nil {
		return err
	}
	if generation != g.generation {
		return fmt.Errorf("group %q: generation %d, current %d: %w", g.id, generation, g.generation, protocol.IllegalGeneration)
	}
	if g.state == CompletingRebalance {
		return fmt.Errorf("group %q: %w", g.id, protocol.RebalanceInProgress)
	}
	m.lastHeard = now
	return nil
}

// Delete marks a group without members Dead (DeleteGroups): NON_EMPTY_GROUP otherwise.
func (g *Group) Delete() error {
	if g.state == Dead {
		return nil
	}
	if len(g.members) > 0 || g.state != Empty {
		return fmt.Errorf("group %q has %d members: %w", g.id, len(g.members), protocol.NonEmptyGroup)
	}
	g.transition(Dead)
	clear(g.pendingMembers)
	return nil
}

// Tick applies what time decides: pending member ids lapse, members whose session ended are
// removed, a wait for the leader's SyncGroup past its deadline ends with the members that did not
// sync removed, and a join phase past its deadline (or its initial delay, with everyone joined)
// ends.
func (g *Group) Tick(now time.Time) (out Outcome) {
	if g.state == Dead {
		return out
	}
	changed := false
	for id, lapses := range g.pendingMembers {
		if !now.Before(lapses) {
			delete(g.pendingMembers, id)
			changed = true
		}
	}
	removed := false
	for id, m := range g.members {
		if !m.awaitingJoin && !m.awaitingSync && !now.Before(m.lastHeard.Add(m.SessionTimeout)) {
			g.removeMember(id, nil, &out)
			removed = true
		}
	}
	if removed {
		g.afterRemoval(now, &out)
	} else if changed {
		g.tryCompleteJoin(now, &out)
	}
	if g.state == CompletingRebalance && !now.Before(g.syncDeadline) {
		g.expireSync(now, &out)
	}
	if g.state == PreparingRebalance {
		if !now.Before(g.rebalanceDeadline) {
			g.completeJoin(now, &out)
		} else {
			g.tryCompleteJoin(now, &out)
		}
	}
	if g.state == Empty && !g.emptyUntil.IsZero() && !now.Before(g.emptyUntil) {
		g.transition(Dead) // retention over: the caller forgets the group
	}
	return out
}

// NextDeadline is when Tick next has something to do; zero when nothing is scheduled.
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if g.state == Dead {
		return next
	}
	for _, lapses := range g.pendingMembers {
		earliest(lapses)
	}
	for _, m := range g.members {
		if !m.awaitingJoin && !m.awaitingSync {
			earliest(m.lastHeard.Add(m.SessionTimeout))
		}
	}
	if g.state == CompletingRebalance {
		earliest(g.syncDeadline)
	}
	if g.state == Empty {
		earliest(g.emptyUntil)
	}
	if g.state == PreparingRebalance {
		earliest(g.rebalanceDeadline)
		if g.allJoined() {
			earliest(g.initialDelayUntil)
		}
	}
	return next
}
