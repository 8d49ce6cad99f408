package group

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// Config holds the coordinator-wide group settings.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts members may ask for
	// (Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms); outside them JoinGroup
	// answers INVALID_SESSION_TIMEOUT.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long a group leaving Empty waits for more members before ending
	// its first join phase (Kafka's group.initial.rebalance.delay.ms, 3 s there). Zero disables it.
	InitialRebalanceDelay time.Duration
	// EmptyRetention is how long a group whose last member left stays, Empty, without members before
	// it expires (Dead, and forgotten by the caller): until then DescribeGroups reports it Empty,
	// ListGroups lists it and DeleteGroups deletes it, as Kafka keeps empty groups until its offsets
	// cleanup (offsets.retention.check.interval.ms, 10 minutes). Zero expires such a group at once.
	EmptyRetention time.Duration
}

// DefaultConfig returns Kafka's session bounds and a short initial delay: long enough for
// consumers started together to share one rebalance, short enough not to be noticed.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:     6 * time.Second,
		MaxSessionTimeout:     30 * time.Minute,
		InitialRebalanceDelay: 300 * time.Millisecond,
		EmptyRetention:        10 * time.Minute,
	}
}

// Validate reports an unusable config.
func (c Config) Validate() error {
	if c.MinSessionTimeout <= 0 || c.MaxSessionTimeout < c.MinSessionTimeout {
		return fmt.Errorf("group: session timeout bounds [%v, %v] are not a positive range", c.MinSessionTimeout, c.MaxSessionTimeout)
	}
	if c.InitialRebalanceDelay < 0 {
		return fmt.Errorf("group: initial rebalance delay %v is negative", c.InitialRebalanceDelay)
	}
	if c.EmptyRetention < 0 {
		return fmt.Errorf("group: empty group retention %v is negative", c.EmptyRetention)
	}
	return nil
}

// Protocol is one assignment protocol a member supports, with its protocol-specific metadata.
type Protocol struct {
	Name     string
	Metadata []byte
}

// Member is one group member.
type Member struct {
	ID string
	// InstanceID is the group.instance.id of a static member; "" for a dynamic one.
	InstanceID           string
	ClientID, ClientHost string
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration
	ProtocolType         string
	// Protocols lists the member's protocols in its order of preference.
	Protocols []Protocol
	// Assignment is what the leader's SyncGroup gave this member in the current generation.
	Assignment []byte

	// joinOrder orders members by first join, for choosing a leader.
	joinOrder uint64
	// awaitingJoin: a JoinGroup of this member is parked. Invariant: only in PreparingRebalance.
	awaitingJoin bool
	// awaitingSync: a SyncGroup of this member is parked. Invariant: only in CompletingRebalance.
	awaitingSync bool
	// lastHeard is when the member last proved alive; its session ends SessionTimeout later.
	lastHeard time.Time
}

// metadataFor returns the member's metadata for protocol name.
func (m *Member) metadataFor(name string) []byte {
	for _, p := range m.Protocols {
		if p.Name == name {
			return p.Metadata
		}
	}
	return nil
}

func (m *Member) supports(name string) bool {
	return slices.ContainsFunc(m.Protocols, func(p Protocol) bool { return p.Name == name })
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && string(x.Metadata) == string(y.Metadata) })
}

// Group is one consumer group's membership state. It is not safe for concurrent use.
type Group struct {
	id     string
	config Config
	state  State
	// generation grows by one at the end of each join phase. Invariant: never decreases.
	generation   int32
	protocolType string
	// protocol is the selected protocol; "" outside CompletingRebalance and Stable.
	protocol string
	// leader is "" or a member id. Invariant: a member id in CompletingRebalance and Stable.
	leader  string
	members map[string]*Member
	// staticMembers maps instance id to member id. Invariant: members[staticMembers[i]].InstanceID == i.
	staticMembers map[string]string
	// pendingMembers holds ids given out with MEMBER_ID_REQUIRED, with when they lapse.
	pendingMembers map[string]time.Time
	nextJoinOrder  uint64
	// rebalanceDeadline ends the join phase whoever has joined (PreparingRebalance only).
	rebalanceDeadline time.Time
	// initialDelayUntil is the earliest end of a join phase that began in Empty.
	initialDelayUntil time.Time
	// syncDeadline ends the wait for the leader's SyncGroup: members that have not sent one by then
	// are removed. Invariant: non-zero exactly in CompletingRebalance.
	syncDeadline time.Time
	// emptyUntil is when a group emptied of its members expires (EmptyRetention after the last one
	// left). Invariant: zero outside Empty, and in a group that never had members.
	emptyUntil time.Time
}

// New returns an Empty group at generation 0.
func New(id string, config Config) *Group {
	return &Group{
		id:             id,
		config:         config,
		members:        map[string]*Member{},
		staticMembers:  map[string]string{},
		pendingMembers: map[string]time.Time{},
	}
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is the current state.
func (g *Group) State() State { return g.state }

// Generation is the current generation.
func (g *Group) Generation() int32 { return g.generation }

// ProtocolType is the members' protocol type ("consumer" for Kafka consumers); it stays when the group
// empties, and is "" in a group that never had members.
func (g *Group) ProtocolType() string { return g.protocolType }

// Protocol is the selected protocol, "" outside CompletingRebalance and Stable.
func (g *Group) Protocol() string { return g.protocol }

// Leader is the leader's member id, or "".
func (g *Group) Leader() string { return g.leader }

// Len is the number of members.
func (g *Group) Len() int { return len(g.members) }

// Members returns copies of the members, ordered by first join.
func (g *Group) Members() []Member {
	out := make([]Member, 0, len(g.members))
	for _, m := range g.orderedMembers() {
		out = append(out, *m)
	}
	return out
}

// SelectedMetadata returns every member's metadata for the selected protocol (nil where none is
// selected): what a consumer group's subscriptions are read from.
func (g *Group) SelectedMetadata() [][]byte {
	var out [][]byte
	for _, m := range g.orderedMembers() {
		if g.protocol != "" {
			out = append(out, m.metadataFor(g.protocol))
		} else if len(m.Protocols) > 0 {
			out = append(out, m.Protocols[0].Metadata)
		}
	}
	return out
}

func (g *Group) orderedMembers() []*Member {
	out := make([]*Member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Member) int { return cmp.Compare(a.joinOrder, b.joinOrder) })
	return out
}

// Outcome carries answers to parked requests that an operation completed, each keyed by the member
// id the request was parked under.
type Outcome struct {
	Joins []JoinResponse
	Syncs []SyncResponse
}

func (o *Outcome) join(r JoinResponse) { o.Joins = append(o.Joins, r) }
func (o *Outcome) sync(r SyncResponse) { o.Syncs = append(o.Syncs, r) }

// Empty reports whether the outcome answers nothing.
func (o Outcome) Empty() bool { return len(o.Joins) == 0 && len(o.Syncs) == 0 }

// lookupMember checks a request's member id and instance id: FENCED_INSTANCE_ID when the instance
// id belongs to another member id, UNKNOWN_MEMBER_ID when the member id is not a member.
func (g *Group) lookupMember(memberID, instanceID string) (*Member, error) {
	if instanceID != "" {
		if current, ok := g.staticMembers[instanceID]; ok && current != memberID {
			return nil, fmt.Errorf("group %q: instance %q is now member %q, not %q: %w", g.id, instanceID, current, memberID, protocol.FencedInstanceID)
		}
	}
	m, ok := g.members[memberID]
	if !ok {
		return nil, fmt.Errorf("group %q: no member %q: %w", g.id, memberID, protocol.UnknownMemberID)
	}
	return m, nil
}

// deadError answers requests to a deleted group: clients look the coordinator up again.
func (g *Group) deadError() error {
	return fmt.Errorf("group %q was deleted: %w", g.id, protocol.CoordinatorNotAvailable)
}
