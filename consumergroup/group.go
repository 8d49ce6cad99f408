package consumergroup

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// Config is a group's policy (group configs over the broker defaults).
type Config struct {
	// SessionTimeout removes a member that has not heartbeated for this long
	// (consumer.session.timeout.ms).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told (consumer.heartbeat.interval.ms).
	HeartbeatInterval time.Duration
	// MaxMembers bounds the group (group.consumer.max.size).
	MaxMembers int
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, MaxMembers: 1000}
}

// MemberState is where a member is in converging on its target assignment.
type MemberState uint8

const (
	Stable MemberState = iota
	UnrevokedPartitions
	UnreleasedPartitions
)

func (s MemberState) String() string {
	switch s {
	case UnrevokedPartitions:
		return "unrevoked_partitions"
	case UnreleasedPartitions:
		return "unreleased_partitions"
	}
	return "stable"
}

// Member is one member of a consumer group.
type Member struct {
	ID, InstanceID, RackID, ClientID, ClientHost string
	// SubscribedNames is sorted; SubscribedRegex is "" when not used.
	SubscribedNames  []string
	SubscribedRegex  string
	ServerAssignor   string
	RebalanceTimeout time.Duration
	Epoch            int32
	PreviousEpoch    int32
	State            MemberState
	// Assigned is what the member was told it owns; PendingRevocation what it must give up.
	Assigned          Assignment
	PendingRevocation Assignment
	// Left: a static member that left with epoch -2, kept until its session ends.
	Left bool

	sessionDeadline time.Time
	revokeDeadline  time.Time
	// sentAssignment is the assignment last sent; a different one is sent again.
	sentAssignment Assignment
}

// Group is one consumer group. It is not safe for concurrent use.
type Group struct {
	id     string
	config Config
	// epoch is the group epoch; assignmentEpoch that of target. Invariant: assignmentEpoch <= epoch.
	epoch, assignmentEpoch int32
	members                map[string]*Member
	target                 map[string]Assignment
	// subscribedTopics is the fingerprint of the subscribed topics' ids and partition counts.
	subscribedTopics string
	// lastAssignor computed the current target ("" before any).
	lastAssignor string
	// dirty: the durable form changed.
	dirty bool
}

// New makes an empty group.
func New(id string, config Config) *Group {
	return &Group{id: id, config: config, members: map[string]*Member{}, target: map[string]Assignment{}}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// Epoch is the group epoch; AssignmentEpoch that of the target assignment.
func (g *Group) Epoch() int32           { return g.epoch }
func (g *Group) AssignmentEpoch() int32 { return g.assignmentEpoch }

// SetConfig changes the policy from the next heartbeat on.
func (g *Group) SetConfig(config Config) { g.config = config }

// Dirty reports whether the durable form changed since the last Record; MarkDirty sets it again.
func (g *Group) Dirty() bool { return g.dirty }
func (g *Group) MarkDirty()  { g.dirty = true }

// State is Kafka's name for the group's state.
func (g *Group) State() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.assignmentEpoch < g.epoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.Epoch != g.assignmentEpoch || m.State != Stable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// HeartbeatRequest is a ConsumerGroupHeartbeat (v1).
type HeartbeatRequest struct {
	MemberID    string
	MemberEpoch int32
	InstanceID  string
	// RackID, SubscribedNames, SubscribedRegex and ServerAssignor are nil when unchanged.
	RackID           *string
	SubscribedNames  []string
	SubscribedRegex  *string
	ServerAssignor   *string
	RebalanceTimeout time.Duration // <= 0: unchanged
	// Owned is nil when not sent (a keepalive).
	Owned      Assignment
	ClientID   string
	ClientHost string
}

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is set when the member must be told its assignment.
	Assignment Assignment
}

// Heartbeat handles one ConsumerGroupHeartbeat against the current topics. Errors wrap
// INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
// UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION or GROUP_MAX_SIZE_REACHED.
func (g *Group) Heartbeat(now time.Time, req HeartbeatRequest, topics map[string]TopicInfo) (HeartbeatResponse, error) {
	fail := func(code protocol.ErrorCode, format string, args ...any) (HeartbeatResponse, error) {
		return HeartbeatResponse{}, fmt.Errorf("consumergroup: group %q: %s: %w", g.id, fmt.Sprintf(format, args...), code)
	}
	if req.MemberID == "" {
		return fail(protocol.InvalidRequest, "member id is empty")
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != "" && *req.ServerAssignor != AssignorUniform && *req.ServerAssignor != AssignorRange {
		return fail(protocol.UnsupportedAssignor, "assignor %q", *req.ServerAssignor)
	}
	if req.SubscribedRegex != nil && *req.SubscribedRegex != "" {
		if _, err := regexp.Compile(*req.SubscribedRegex); err != nil {
			return fail(protocol.InvalidRegularExpression, "%v", err)
		}
	}
	member, known := g.members[req.MemberID]
	switch {
	case req.MemberEpoch == -1 || req.MemberEpoch == -2:
		if !known {
			return fail(protocol.UnknownMemberID, "member %q is not in the group", req.MemberID)
		}
		if req.MemberEpoch == -2 && member.InstanceID != "" {
			member.Left = true
			g.dirty = true
		} else {
			g.remove(member.ID)
		}
		return HeartbeatResponse{MemberEpoch: req.MemberEpoch, HeartbeatInterval: g.config.HeartbeatInterval}, nil
	case req.MemberEpoch < -2:
		return fail(protocol.InvalidRequest, "member epoch %d", req.MemberEpoch)
	case req.MemberEpoch == 0:
		if req.Owned.Len() > 0 {
			return fail(protocol.InvalidRequest, "a joining member owns partitions")
		}
		if !known && req.SubscribedNames == nil && (req.SubscribedRegex == nil || *req.SubscribedRegex == "") {
			return fail(protocol.InvalidRequest, "joining needs subscribed topic names or a regular expression")
		}
		if known {
			// A rejoin (after fencing): the member starts over and owns nothing.
			member.Assigned, member.PendingRevocation, member.State = Assignment{}, nil, Stable
			member.Epoch, member.PreviousEpoch = 0, 0
			member.sentAssignment = nil
			break
		}
		member = &Member{ID: req.MemberID, InstanceID: req.InstanceID, Assigned: Assignment{}, ServerAssignor: AssignorUniform}
		if req.InstanceID != "" {
			if old := g.staticMember(req.InstanceID); old != nil {
				if !old.Left {
					return fail(protocol.UnreleasedInstanceID, "instance %q is still member %q", req.InstanceID, old.ID)
				}
				// The static member comes back: it takes over epoch and assignment.
				member.Epoch, member.PreviousEpoch, member.State = old.Epoch, old.PreviousEpoch, old.State
				member.Assigned, member.PendingRevocation = old.Assigned, old.PendingRevocation
				member.SubscribedNames, member.SubscribedRegex, member.ServerAssignor = old.SubscribedNames, old.SubscribedRegex, old.ServerAssignor
				member.revokeDeadline = old.revokeDeadline
				if target, ok := g.target[old.ID]; ok {
					g.target[member.ID] = target
				}
				delete(g.members, old.ID)
				delete(g.target, old.ID)
			}
		}
		if len(g.members) >= g.config.MaxMembers {
			return fail(protocol.GroupMaxSizeReached, "%d members", len(g.members))
		}
		g.members[member.ID] = member
		g.bump()
	default:
		if !known {
			return fail(protocol.UnknownMemberID, "member %q is not in the group", req.MemberID)
		}
		if req.MemberEpoch != member.Epoch && !(req.MemberEpoch == member.PreviousEpoch && subset(req.Owned, member.Assigned)) {
			return fail(protocol.FencedMemberEpoch, "member %q epoch %d, current %d", req.MemberID, req.MemberEpoch, member.Epoch)
		}
	}
	member.Left = false
	member.ClientID, member.ClientHost = req.ClientID, req.ClientHost
	member.sessionDeadline = now.Add(g.config.SessionTimeout)
	if req.RackID != nil {
		member.RackID = *req.RackID
	}
	if req.RebalanceTimeout > 0 {
		member.RebalanceTimeout = req.RebalanceTimeout
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != "" && *req.ServerAssignor != member.ServerAssignor {
		member.ServerAssignor = *req.ServerAssignor
		g.bump()
	}
	if req.SubscribedNames != nil {
		names := slices.Compact(slices.Sorted(slices.Values(req.SubscribedNames)))
		if !slices.Equal(names, member.SubscribedNames) {
			member.SubscribedNames = names
			g.bump()
		}
	}
	if req.SubscribedRegex != nil && *req.SubscribedRegex != member.SubscribedRegex {
		member.SubscribedRegex = *req.SubscribedRegex
		g.bump()
	}
	g.refreshTarget(topics)
	g.reconcile(member, req.Owned, now)
	resp := HeartbeatResponse{MemberEpoch: member.Epoch, HeartbeatInterval: g.config.HeartbeatInterval}
	if req.MemberEpoch == 0 || req.Owned != nil || member.sentAssignment == nil || !member.sentAssignment.Equal(member.Assigned) {
		resp.Assignment = member.Assigned.Clone()
		member.sentAssignment = member.Assigned.Clone()
	}
	return resp, nil
}

// bump moves the group epoch on.
func (g *Group) bump() {
	g.epoch++
	g.dirty = true
}

func (g *Group) staticMember(instanceID string) *Member {
	for _, m := range g.members {
		if m.InstanceID == instanceID {
			return m
		}
	}
	return nil
}

func (g *Group) remove(memberID string) {
	delete(g.members, memberID)
	delete(g.target, memberID)
	g.bump()
}

// resolve is the sorted set of existing topics a member subscribes to.
func resolve(m *Member, topics map[string]TopicInfo) []string {
	var out []string
	for _, name := range m.SubscribedNames {
		if info, ok := topics[name]; ok && info.Partitions > 0 {
			out = append(out, name)
		}
	}
	if m.SubscribedRegex != "" {
		if re, err := regexp.Compile("^(?:" + m.SubscribedRegex + ")$"); err == nil {
			for name, info := range topics {
				if !strings.HasPrefix(name, "__") && info.Partitions > 0 && re.MatchString(name) {
					out = append(out, name)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// refreshTarget bumps the epoch when the subscribed topics changed, and computes the target
// assignment when the group epoch moved past it.
func (g *Group) refreshTarget(topics map[string]TopicInfo) {
	var subscribers []subscriber
	var fingerprint strings.Builder
	seen := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		s := subscriber{id: id, topics: resolve(g.members[id], topics), rangeKey: cmp.Or(g.members[id].InstanceID, id)}
		subscribers = append(subscribers, s)
		for _, name := range s.topics {
			seen[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(seen)) {
		info := topics[name]
		fmt.Fprintf(&fingerprint, "%s/%x/%d;", name, info.ID, info.Partitions)
	}
	if fingerprint.String() != g.subscribedTopics {
		g.subscribedTopics = fingerprint.String()
		g.bump()
	}
	if g.assignmentEpoch == g.epoch {
		return
	}
	g.lastAssignor = g.assignor()
	if g.lastAssignor == AssignorRange {
		g.target = assignRange(subscribers, topics)
	} else {
		g.target = assignUniform(subscribers, topics, g.target)
	}
	g.assignmentEpoch = g.epoch
	g.dirty = true
}

// Assignor is the assignor that computed the current target assignment (uniform before any).
func (g *Group) Assignor() string {
	if g.lastAssignor == "" {
		return AssignorUniform
	}
	return g.lastAssignor
}

// assignor is the one most members ask for (uniform on a tie).
func (g *Group) assignor() string {
	votes := map[string]int{}
	for _, m := range g.members {
		votes[m.ServerAssignor]++
	}
	if votes[AssignorRange] > votes[AssignorUniform] {
		return AssignorRange
	}
	return AssignorUniform
}

// reconcile moves a member one step towards its target.
func (g *Group) reconcile(m *Member, owned Assignment, now time.Time) {
	if m.State == UnrevokedPartitions {
		if owned == nil || intersects(owned, m.PendingRevocation) {
			return // still revoking
		}
		m.PendingRevocation, m.State = nil, Stable
		m.revokeDeadline = time.Time{}
		g.dirty = true
	}
	if m.Epoch == g.assignmentEpoch && m.State == Stable {
		return
	}
	target := g.target[m.ID].set()
	assigned := m.Assigned.set()
	keep, revoke := map[TopicPartition]bool{}, map[TopicPartition]bool{}
	for tp := range assigned {
		if target[tp] {
			keep[tp] = true
		} else {
			revoke[tp] = true
		}
	}
	g.dirty = true
	if len(revoke) > 0 {
		m.Assigned, m.PendingRevocation, m.State = assignmentOf(keep), assignmentOf(revoke), UnrevokedPartitions
		timeout := m.RebalanceTimeout
		if timeout <= 0 {
			timeout = g.config.SessionTimeout
		}
		m.revokeDeadline = now.Add(timeout)
		return
	}
	held := map[TopicPartition]bool{}
	for id, other := range g.members {
		if id == m.ID {
			continue
		}
		for tp := range other.Assigned.set() {
			held[tp] = true
		}
		for tp := range other.PendingRevocation.set() {
			held[tp] = true
		}
	}
	unreleased := false
	for tp := range target {
		if held[tp] {
			unreleased = true
		} else {
			keep[tp] = true
		}
	}
	m.Assigned = assignmentOf(keep)
	if m.Epoch != g.assignmentEpoch {
		m.PreviousEpoch, m.Epoch = m.Epoch, g.assignmentEpoch
	}
	m.State = Stable
	if unreleased {
		m.State = UnreleasedPartitions
	}
}

func intersects(a, b Assignment) bool {
	bs := b.set()
	for tp := range a.set() {
		if bs[tp] {
			return true
		}
	}
	return false
}

func subset(a, b Assignment) bool {
	bs := b.set()
	for tp := range a.set() {
		if !bs[tp] {
			return false
		}
	}
	return true
}

// Tick removes members whose session ended, or that did not revoke within their rebalance
// timeout, and returns their ids.
func (g *Group) Tick(now time.Time) []string {
	var removed []string
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		if !m.sessionDeadline.After(now) || m.State == UnrevokedPartitions && !m.revokeDeadline.After(now) {
			removed = append(removed, id)
			g.remove(id)
		}
	}
	return removed
}

// NextDeadline is the earliest session or revocation deadline, zero without members.
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	for _, m := range g.members {
		for _, d := range []time.Time{m.sessionDeadline, m.revokeDeadline} {
			if !d.IsZero() && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
	}
	return next
}

// Members returns copies of the members with their targets, sorted by id.
func (g *Group) Members() []MemberView {
	out := make([]MemberView, 0, len(g.members))
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := *g.members[id]
		m.SubscribedNames = slices.Clone(m.SubscribedNames)
		m.Assigned, m.PendingRevocation = m.Assigned.Clone(), m.PendingRevocation.Clone()
		out = append(out, MemberView{Member: m, Target: g.target[id].Clone()})
	}
	return out
}

// MemberView is a member with its target assignment.
type MemberView struct {
	Member
	Target Assignment
}

// HasMembers reports whether the group has members.
func (g *Group) HasMembers() bool { return len(g.members) > 0 }

// CheckCommit validates an offset commit by member at epoch: STALE_MEMBER_EPOCH for an epoch that
// is neither the member's current nor its previous one, UNKNOWN_MEMBER_ID for an unknown member; a
// commit without a member (epoch < 0, no id) is accepted only while the group is empty.
func (g *Group) CheckCommit(memberID string, epoch int32) error {
	if memberID == "" && epoch < 0 {
		if len(g.members) > 0 {
			return fmt.Errorf("consumergroup: group %q has members: %w", g.id, protocol.UnknownMemberID)
		}
		return nil
	}
	m, ok := g.members[memberID]
	if !ok {
		return fmt.Errorf("consumergroup: group %q: member %q is not in the group: %w", g.id, memberID, protocol.UnknownMemberID)
	}
	if epoch != m.Epoch && epoch != m.PreviousEpoch {
		return fmt.Errorf("consumergroup: group %q: member %q commits at epoch %d, current %d: %w", g.id, memberID, epoch, m.Epoch, protocol.StaleMemberEpoch)
	}
	return nil
}
