package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// JoinRequest is one JoinGroup request.
type JoinRequest struct {
	MemberID             string
	InstanceID           string
	ClientID, ClientHost string
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration
	ProtocolType         string
	Protocols            []Protocol
	// RequireKnownMemberID is set from JoinGroup v4: a member without an id first gets one with
	// MEMBER_ID_REQUIRED, and joins with it.
	RequireKnownMemberID bool
	// NewMemberID is the id to give the member if it needs one. The caller makes it unique
	// (Kafka: client id, "-", a random UUID).
	NewMemberID string
}

// JoinResponse answers a JoinGroup.
type JoinResponse struct {
	// Err is nil or wraps a protocol.ErrorCode.
	Err          error
	MemberID     string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	// Members is the member list with metadata for the selected protocol, for the leader only.
	Members []JoinedMember
	// SkipAssignment tells a static leader that rejoined a Stable group not to assign again (v9+).
	SkipAssignment bool
}

// JoinedMember is one member as the leader sees it.
type JoinedMember struct {
	MemberID   string
	InstanceID string
	Metadata   []byte
}

// Join handles a JoinGroup. It returns the answer and parked=false, or parked=true when the answer
// comes later in an Outcome under resp.MemberID; either way out holds answers to other parked
// requests (and possibly this one's, when it completed the join phase). Park the request before
// delivering out.
func (g *Group) Join(now time.Time, req JoinRequest) (resp JoinResponse, parked bool, out Outcome) {
	fail := func(err error) (JoinResponse, bool, Outcome) {
		return JoinResponse{Err: err, MemberID: req.MemberID, Generation: -1}, false, out
	}
	if g.state == Dead {
		return fail(g.deadError())
	}
	if req.SessionTimeout < g.config.MinSessionTimeout || req.SessionTimeout > g.config.MaxSessionTimeout {
		return fail(fmt.Errorf("group %q: session timeout %v outside [%v, %v]: %w", g.id, req.SessionTimeout,
			g.config.MinSessionTimeout, g.config.MaxSessionTimeout, protocol.InvalidSessionTimeout))
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout // JoinGroup v0 has no rebalance timeout
	}
	if req.MemberID == "" {
		if err := g.checkProtocols(req, ""); err != nil {
			return fail(err)
		}
		if req.InstanceID != "" {
			if oldID, known := g.staticMembers[req.InstanceID]; known {
				return g.replaceStaticMember(now, oldID, req)
			}
		} else if req.RequireKnownMemberID {
			g.pendingMembers[req.NewMemberID] = now.Add(req.SessionTimeout)
			return JoinResponse{Err: fmt.Errorf("group %q: %w", g.id, protocol.MemberIDRequired), MemberID: req.NewMemberID, Generation: -1}, false, out
		}
		req.MemberID = req.NewMemberID
		g.addMember(now, req, &out)
		return JoinResponse{MemberID: req.MemberID}, true, out
	}

	if _, pending := g.pendingMembers[req.MemberID]; pending {
		if current, taken := g.staticMembers[req.InstanceID]; req.InstanceID != "" && taken {
			return fail(fmt.Errorf("group %q: instance %q is member %q, not %q: %w", g.id, req.InstanceID, current, req.MemberID, protocol.FencedInstanceID))
		}
		if err := g.checkProtocols(req, ""); err != nil {
			return fail(err)
		}
		delete(g.pendingMembers, req.MemberID)
		g.addMember(now, req, &out)
		return JoinResponse{MemberID: req.MemberID}, true, out
	}
	m, err := g.lookupMember(req.MemberID, req.InstanceID)
	if err != nil {
		return fail(err)
	}
	if err := g.checkProtocols(req, m.ID); err != nil {
		return fail(err)
	}
	changed := !sameProtocols(m.Protocols, req.Protocols)
	g.updateMember(now, m, req)
	switch g.state {
	case PreparingRebalance:
		m.awaitingJoin = true
		g.tryCompleteJoin(now, &out)
		return JoinResponse{MemberID: m.ID}, true, out
	case CompletingRebalance, Stable:
		if changed || (g.state == Stable && m.ID == g.leader) {
			g.prepareRebalance(now, &out)
			m.awaitingJoin = true
			g.tryCompleteJoin(now, &out)
			return JoinResponse{MemberID: m.ID}, true, out
		}
		// Nothing changed: the member missed the JoinGroup answer of the current generation.
		return g.currentGenerationResponse(m, false), false, out
	}
	panic(fmt.Sprintf("group %q: member %q exists in state %s", g.id, m.ID, g.state))
}

// checkProtocols checks a joining member's protocol type and protocols against the group's other
// members (all but except).
func (g *Group) checkProtocols(req JoinRequest, except string) error {
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return fmt.Errorf("group %q: join without a protocol type or protocols: %w", g.id, protocol.InconsistentGroupProtocol)
	}
	if len(g.members) > 0 && req.ProtocolType != g.protocolType {
		return fmt.Errorf("group %q: protocol type %q, the group's is %q: %w", g.id, req.ProtocolType, g.protocolType, protocol.InconsistentGroupProtocol)
	}
	if len(g.members) == 0 || len(g.members) == 1 && g.members[except] != nil {
		return nil
	}
	for _, p := range req.Protocols {
		common := true
		for id, m := range g.members {
			if id != except && !m.supports(p.Name) {
				common = false
				break
			}
		}
		if common {
			return nil
		}
	}
	return fmt.Errorf("group %q: no protocol in common with the members: %w", g.id, protocol.InconsistentGroupProtocol)
}

func (g *Group) updateMember(now time.Time, m *Member, req JoinRequest) {
	m.ClientID, m.ClientHost = req.ClientID, req.ClientHost
	m.SessionTimeout, m.RebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	m.ProtocolType = req.ProtocolType
	m.Protocols = slices.Clone(req.Protocols)
	m.lastHeard = now
}

// addMember adds a member whose JoinGroup parks, starting or extending the join phase.
func (g *Group) addMember(now time.Time, req JoinRequest, out *Outcome) {
	m := &Member{ID: req.MemberID, InstanceID: req.InstanceID, joinOrder: g.nextJoinOrder}
	g.nextJoinOrder++
	g.updateMember(now, m, req)
	g.members[m.ID] = m
	if m.InstanceID != "" {
		g.staticMembers[m.InstanceID] = m.ID
	}
	if len(g.members) == 1 {
		g.protocolType = m.ProtocolType
	}
	switch g.state {
	case Empty, CompletingRebalance, Stable:
		g.prepareRebalance(now, out)
	case PreparingRebalance:
		if !g.initialDelayUntil.IsZero() && now.Before(g.initialDelayUntil) {
			// A new member during the initial delay: wait once more, within the deadline.
			g.initialDelayUntil = minTime(now.Add(g.config.InitialRebalanceDelay), g.rebalanceDeadline)
		}
		// The new member may lengthen the deadline.
		g.rebalanceDeadline = maxTime(g.rebalanceDeadline, now.Add(m.RebalanceTimeout))
	}
	m.awaitingJoin = true
	g.tryCompleteJoin(now, out)
}

// replaceStaticMember gives a static member that rejoined without its member id a new one, and
// fences the old id.
func (g *Group) replaceStaticMember(now time.Time, oldID string, req JoinRequest) (JoinResponse, bool, Outcome) {
	var out Outcome
	old := g.members[oldID]
	fenced := fmt.Errorf("group %q: instance %q rejoined as %q: %w", g.id, req.InstanceID, req.NewMemberID, protocol.FencedInstanceID)
	if old.awaitingJoin {
		out.join(JoinResponse{Err: fenced, MemberID: oldID, Generation: -1})
	}
	if old.awaitingSync {
		out.sync(SyncResponse{Err: fenced, MemberID: oldID})
	}
	m := &Member{ID: req.NewMemberID, InstanceID: req.InstanceID, joinOrder: old.joinOrder, Assignment: old.Assignment}
	g.updateMember(now, m, req)
	delete(g.members, oldID)
	g.members[m.ID] = m
	// As Kafka: a restarted static member causes no rebalance unless it would change the selected
	// protocol. Its metadata may differ (a restarted consumer owns nothing yet); the group keeps the
	// assignment it has.
	changed := old.ProtocolType != req.ProtocolType || g.state == Stable && g.selectProtocol() != g.protocol
	g.staticMembers[m.InstanceID] = m.ID
	if g.leader == oldID {
		g.leader = m.ID
	}
	switch {
	case g.state == Stable && !changed:
		// No rebalance: the member gets the current generation and, by SyncGroup, its old
		// assignment. A leader is told not to assign again (v9+), since the group keeps its
		// assignment.
		return g.currentGenerationResponse(m, m.ID == g.leader), false, out
	case g.state == PreparingRebalance:
		m.awaitingJoin = true
		g.tryCompleteJoin(now, &out)
	default:
		g.prepareRebalance(now, &out)
		m.awaitingJoin = true
		g.tryCompleteJoin(now, &out)
	}
	return JoinResponse{MemberID: m.ID}, true, out
}

// currentGenerationResponse answers a member with the generation already decided.
func (g *Group) currentGenerationResponse(m *Member, skipAssignment bool) JoinResponse {
	resp := JoinResponse{
		MemberID: m.ID, Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		Leader: g.leader, SkipAssignment: skipAssignment,
	}
	if m.ID == g.leader {
		resp.Members = g.joinedMembers()
	}
	return resp
}

func (g *Group) joinedMembers() []JoinedMember {
	var out []JoinedMember
	for _, m := range g.orderedMembers() {
		out = append(out, JoinedMember{MemberID: m.ID, InstanceID: m.InstanceID, Metadata: m.metadataFor(g.protocol)})
	}
	return out
}

// prepareRebalance starts a join phase: Empty, CompletingRebalance or Stable -> PreparingRebalance.
// Parked SyncGroups are answered REBALANCE_IN_PROGRESS. In PreparingRebalance it does nothing.
func (g *Group) prepareRebalance(now time.Time, out *Outcome) {
	if g.state == PreparingRebalance {
		return
	}
	wasEmpty := g.state == Empty
	for _, m := range g.members {
		if m.awaitingSync {
			m.awaitingSync = false
			out.sync(SyncResponse{Err: fmt.Errorf("group %q: %w", g.id, protocol.RebalanceInProgress), MemberID: m.ID})
		}
		m.Assignment = nil
	}
	g.transition(PreparingRebalance)
	g.protocol = ""
	g.syncDeadline = time.Time{}
	g.rebalanceDeadline = now.Add(g.longestRebalanceTimeout())
	g.initialDelayUntil = time.Time{}
	if wasEmpty && g.config.InitialRebalanceDelay > 0 {
		g.initialDelayUntil = minTime(now.Add(g.config.InitialRebalanceDelay), g.rebalanceDeadline)
	}
}

// longestRebalanceTimeout is the group's rebalance timeout: the largest of its members' (Kafka's
// group.rebalanceTimeoutMs), bounding both the join phase and the wait for the leader's SyncGroup.
func (g *Group) longestRebalanceTimeout() time.Duration {
	var longest time.Duration
	for _, m := range g.members {
		longest = max(longest, m.RebalanceTimeout)
	}
	return longest
}

// allJoined reports whether every member and every pending member id has rejoined.
func (g *Group) allJoined() bool {
	if len(g.pendingMembers) > 0 {
		return false
	}
	for _, m := range g.members {
		if !m.awaitingJoin {
			return false
		}
	}
	return true
}

// tryCompleteJoin ends the join phase if everyone has rejoined and no initial delay holds it.
func (g *Group) tryCompleteJoin(now time.Time, out *Outcome) {
	if g.state != PreparingRebalance || now.Before(g.initialDelayUntil) || !g.allJoined() {
		return
	}
	g.completeJoin(now, out)
}

// completeJoin ends the join phase: members that did not rejoin are removed, the generation grows,
// and every parked JoinGroup is answered. PreparingRebalance -> CompletingRebalance, or Empty when no
// member is left.
func (g *Group) completeJoin(now time.Time, out *Outcome) {
	for id, m := range g.members {
		if !m.awaitingJoin {
			g.removeMember(id, nil, out)
		}
	}
	clear(g.pendingMembers)
	g.generation++
	g.rebalanceDeadline, g.initialDelayUntil = time.Time{}, time.Time{}
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.transition(Empty)
		if g.config.EmptyRetention > 0 {
			g.emptyUntil = now.Add(g.config.EmptyRetention)
		}
		return
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.orderedMembers()[0].ID
	}
	g.transition(CompletingRebalance)
	g.syncDeadline = now.Add(g.longestRebalanceTimeout())
	for _, m := range g.orderedMembers() {
		m.awaitingJoin = false
		m.lastHeard = now
		out.join(g.currentGenerationResponse(m, false))
	}
}

// selectProtocol picks, among the protocols every member supports, the one most members prefer
// most; ties go to the lowest name.
func (g *Group) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.Protocols {
			if g.supportedByAll(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for name, n := range votes {
		if n > bestVotes || n == bestVotes && name < best {
			best, bestVotes = name, n
		}
	}
	if best == "" {
		panic(fmt.Sprintf("group %q: members share no protocol, which joins must have prevented", g.id))
	}
	return best
}

func (g *Group) supportedByAll(name string) bool {
	for _, m := range g.members {
		if !m.supports(name) {
			return false
		}
	}
	return true
}

// removeMember drops a member; its parked requests are answered with err (UNKNOWN_MEMBER_ID when
// nil). It does not change state: see afterRemoval.
func (g *Group) removeMember(id string, err error, out *Outcome) {
	m, ok := g.members[id]
	if !ok {
		return
	}
	if err == nil {
		err = fmt.Errorf("group %q: member %q was removed: %w", g.id, id, protocol.UnknownMemberID)
	}
	if m.awaitingJoin {
		out.join(JoinResponse{Err: err, MemberID: id, Generation: -1})
	}
	if m.awaitingSync {
		out.sync(SyncResponse{Err: err, MemberID: id})
	}
	delete(g.members, id)
	if m.InstanceID != "" && g.staticMembers[m.InstanceID] == id {
		delete(g.staticMembers, m.InstanceID)
	}
	if g.leader == id {
		g.leader = ""
	}
}

// expireSync ends a CompletingRebalance whose leader did not send SyncGroup by the sync deadline,
// as Kafka's coordinator does: the members that have not synced (the leader always among them) are
// removed, and the rest rebalance; their parked SyncGroups get REBALANCE_IN_PROGRESS and they
// rejoin. CompletingRebalance -> PreparingRebalance (-> Empty when no member is left).
func (g *Group) expireSync(now time.Time, out *Outcome) {
	for id, m := range g.members {
		if !m.awaitingSync {
			g.removeMember(id, nil, out)
		}
	}
	g.afterRemoval(now, out)
}

// afterRemoval reacts to members leaving: a decided generation is void, and a join phase may now
// be complete.
func (g *Group) afterRemoval(now time.Time, out *Outcome) {
	switch g.state {
	case CompletingRebalance, Stable:
		g.prepareRebalance(now, out)
		g.tryCompleteJoin(now, out)
	case PreparingRebalance:
		g.tryCompleteJoin(now, out)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
