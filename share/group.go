package share

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// GroupConfig is a share group's membership policy.
type GroupConfig struct {
	// SessionTimeout removes a member that has not heartbeated for this long
	// (group.share.session.timeout.ms).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told to heartbeat at
	// (group.share.heartbeat.interval.ms).
	HeartbeatInterval time.Duration
	// MaxMembers bounds the group (group.share.max.size).
	MaxMembers int
}

// DefaultGroupConfig returns Kafka's defaults.
func DefaultGroupConfig() GroupConfig {
	return GroupConfig{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, MaxMembers: 200}
}

// Validate reports an unusable config.
func (c GroupConfig) Validate() error {
	if c.SessionTimeout <= 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout {
		return fmt.Errorf("share: heartbeat interval %v must be positive and below the session timeout %v", c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.MaxMembers < 1 {
		return fmt.Errorf("share: max group size %d must be positive", c.MaxMembers)
	}
	return nil
}

// TopicInfo is what assignment needs to know of a topic.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// TopicAssignment is a member's partitions of one topic.
type TopicAssignment struct {
	Topic      string
	ID         [16]byte
	Partitions []int32
}

// Member is one share group member.
type Member struct {
	ID                   string
	RackID               string
	ClientID, ClientHost string
	// Epoch is the member epoch; PreviousEpoch the one before its last assignment change.
	Epoch, PreviousEpoch int32
	// Subscribed is the sorted list of topic names the member subscribes to.
	Subscribed []string
	// Assignment is sorted by topic name.
	Assignment []TopicAssignment
	// deadline is when the member's session ends.
	deadline time.Time
}

// Group is one share group's membership. It is not safe for concurrent use.
type Group struct {
	id     string
	config GroupConfig
	// epoch is the group epoch. Invariant: it never decreases and every member's Epoch <= epoch.
	epoch   int32
	members map[string]*Member
}

// NewGroup makes an empty group; epoch is where the group epoch resumes (the persisted one, or 0).
func NewGroup(id string, config GroupConfig, epoch int32) *Group {
	return &Group{id: id, config: config, epoch: max(epoch, 0), members: map[string]*Member{}}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// Epoch is the group epoch.
func (g *Group) Epoch() int32 { return g.epoch }

// SetConfig changes the membership policy from the next heartbeat on.
func (g *Group) SetConfig(config GroupConfig) { g.config = config }

// State is Kafka's name for the group's state: Empty or Stable.
func (g *Group) State() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// HeartbeatRequest is a ShareGroupHeartbeat.
type HeartbeatRequest struct {
	MemberID string
	// MemberEpoch is 0 to join, -1 to leave, else the member's current epoch.
	MemberEpoch int32
	// RackID and Subscribed are nil when unchanged since the last heartbeat.
	RackID     *string
	Subscribed []string
	ClientID   string
	ClientHost string
}

// HeartbeatResponse is the answer to a ShareGroupHeartbeat.
type HeartbeatResponse struct {
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assignment is set (possibly empty) when the member must be told its assignment.
	Assignment    []TopicAssignment
	HasAssignment bool
}

// Heartbeat handles one ShareGroupHeartbeat against the current topics. Errors wrap
// INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH or GROUP_MAX_SIZE_REACHED. A leave
// (epoch -1) removes the member; the caller releases what it held.
func (g *Group) Heartbeat(now time.Time, req HeartbeatRequest, topics map[string]TopicInfo) (HeartbeatResponse, error) {
	if req.MemberID == "" {
		return HeartbeatResponse{}, fmt.Errorf("share: group %q: heartbeat without a member id: %w", g.id, protocol.InvalidRequest)
	}
	member, known := g.members[req.MemberID]
	switch {
	case req.MemberEpoch == -1:
		if !known {
			return HeartbeatResponse{}, fmt.Errorf("share: group %q: member %q is not in the group: %w", g.id, req.MemberID, protocol.UnknownMemberID)
		}
		delete(g.members, req.MemberID)
		g.epoch++
		return HeartbeatResponse{MemberEpoch: -1, HeartbeatInterval: g.config.HeartbeatInterval}, nil
	case req.MemberEpoch < -1:
		return HeartbeatResponse{}, fmt.Errorf("share: group %q: member epoch %d: %w", g.id, req.MemberEpoch, protocol.InvalidRequest)
	case req.MemberEpoch == 0:
		if req.Subscribed == nil && !known || req.Subscribed != nil && len(req.Subscribed) == 0 {
			return HeartbeatResponse{}, fmt.Errorf("share: group %q: joining needs subscribed topic names: %w", g.id, protocol.InvalidRequest)
		}
		if !known {
			if len(g.members) >= g.config.MaxMembers {
				return HeartbeatResponse{}, fmt.Errorf("share: group %q has %d members: %w", g.id, len(g.members), protocol.GroupMaxSizeReached)
			}
			member = &Member{ID: req.MemberID}
			g.members[req.MemberID] = member
			g.epoch++
		}
	default:
		if !known {
			return HeartbeatResponse{}, fmt.Errorf("share: group %q: member %q is not in the group: %w", g.id, req.MemberID, protocol.UnknownMemberID)
		}
		if req.MemberEpoch != member.Epoch && req.MemberEpoch != member.PreviousEpoch {
			return HeartbeatResponse{}, fmt.Errorf("share: group %q: member %q epoch %d, current %d: %w",
				g.id, req.MemberID, req.MemberEpoch, member.Epoch, protocol.FencedMemberEpoch)
		}
	}
	member.ClientID, member.ClientHost = req.ClientID, req.ClientHost
	if req.RackID != nil {
		member.RackID = *req.RackID
	}
	if req.Subscribed != nil {
		subscribed := slices.Compact(slices.Sorted(slices.Values(req.Subscribed)))
		if !slices.Equal(subscribed, member.Subscribed) {
			member.Subscribed = subscribed
			g.epoch++
		}
	}
	member.deadline = now.Add(g.config.SessionTimeout)
	assignment := assign(member.Subscribed, topics)
	changed := !sameAssignment(assignment, member.Assignment) || member.Epoch == 0
	if changed {
		g.epoch++
		member.PreviousEpoch, member.Epoch = member.Epoch, g.epoch
		member.Assignment = assignment
	}
	resp := HeartbeatResponse{MemberEpoch: member.Epoch, HeartbeatInterval: g.config.HeartbeatInterval}
	if changed || req.MemberEpoch != member.Epoch || req.Subscribed != nil {
		resp.Assignment, resp.HasAssignment = cloneAssignment(member.Assignment), true
	}
	return resp, nil
}

// assign gives a member every partition of every existing topic it subscribes to.
func assign(subscribed []string, topics map[string]TopicInfo) []TopicAssignment {
	var out []TopicAssignment
	for _, name := range subscribed {
		info, ok := topics[name]
		if !ok || info.Partitions <= 0 {
			continue
		}
		partitions := make([]int32, info.Partitions)
		for i := range partitions {
			partitions[i] = int32(i)
		}
		out = append(out, TopicAssignment{Topic: name, ID: info.ID, Partitions: partitions})
	}
	return out
}

func sameAssignment(a, b []TopicAssignment) bool {
	return slices.EqualFunc(a, b, func(x, y TopicAssignment) bool {
		return x.Topic == y.Topic && x.ID == y.ID && slices.Equal(x.Partitions, y.Partitions)
	})
}

func cloneAssignment(a []TopicAssignment) []TopicAssignment {
	out := make([]TopicAssignment, len(a))
	for i, t := range a {
		out[i] = TopicAssignment{Topic: t.Topic, ID: t.ID, Partitions: slices.Clone(t.Partitions)}
	}
	return out
}

// Tick removes members whose session ended at or before now and returns their ids, sorted.
func (g *Group) Tick(now time.Time) []string {
	var expired []string
	for id, m := range g.members {
		if !m.deadline.After(now) {
			expired = append(expired, id)
		}
	}
	slices.Sort(expired)
	for _, id := range expired {
		delete(g.members, id)
	}
	if len(expired) > 0 {
		g.epoch++
	}
	return expired
}

// Remove removes a member (DeleteGroups or an operator) and reports whether it was there.
func (g *Group) Remove(memberID string) bool {
	if _, ok := g.members[memberID]; !ok {
		return false
	}
	delete(g.members, memberID)
	g.epoch++
	return true
}

// NextDeadline is the earliest session end, zero without members.
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	for _, m := range g.members {
		if next.IsZero() || m.deadline.Before(next) {
			next = m.deadline
		}
	}
	return next
}

// HasMember reports whether memberID is in the group.
func (g *Group) HasMember(memberID string) bool {
	_, ok := g.members[memberID]
	return ok
}

// Members returns copies of the members, sorted by id.
func (g *Group) Members() []Member {
	out := make([]Member, 0, len(g.members))
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := *g.members[id]
		m.Subscribed = slices.Clone(m.Subscribed)
		m.Assignment = cloneAssignment(m.Assignment)
		out = append(out, m)
	}
	return out
}

// SubscribedTopics is the union of the members' subscriptions, sorted.
func (g *Group) SubscribedTopics() []string {
	var out []string
	for _, m := range g.members {
		out = append(out, m.Subscribed...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
