package broker

// The group coordinator: this broker coordinates every consumer group (a single-node cluster has one
// coordinator). Membership lives in memory, one group.Group per group id, each under its own lock
// with the JoinGroup and SyncGroup requests parked in it and a timer set to the group's next
// deadline (session ends, the end of a join phase, the end of the wait for the leader's SyncGroup).
// Committed offsets live in the Raft coordinator (coordinator.Offsets), so they survive restarts;
// membership does not, and members that come back after a restart get UNKNOWN_MEMBER_ID or
// ILLEGAL_GENERATION and join again.
//
// Lock order: groupCoordinator.mu, then groupEntry.mu. Responses are sent under groupEntry.mu
// (Responder.Send only queues); nothing blocks under it.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/group"
	"github.com/sluice-mq/sluice/protocol"
)

type groupCoordinator struct {
	config group.Config

	mu struct {
		sync.Mutex
		groups map[string]*groupEntry
		closed bool
	}
}

// groupEntry is one group with its parked requests and its timer.
type groupEntry struct {
	id string

	mu struct {
		sync.Mutex
		group *group.Group
		// joins and syncs are the parked requests, by member id.
		joins map[string]*parkedJoin
		syncs map[string]*parkedSync
		timer *time.Timer
		// forgotten: the entry left the coordinator's map; whoever locks it must look again.
		forgotten bool
	}
}

type parkedJoin struct {
	r   *request
	req *kmsg.JoinGroupRequest
}

type parkedSync struct {
	r   *request
	req *kmsg.SyncGroupRequest
}

func newGroupCoordinator(config group.Config) *groupCoordinator {
	c := &groupCoordinator{config: config}
	c.mu.groups = map[string]*groupEntry{}
	return c
}

// errGroupsClosed answers requests during shutdown.
var errGroupsClosed = fmt.Errorf("broker: shutting down: %w", protocol.CoordinatorNotAvailable)

// with runs fn on group id under its lock, creating the group if create is set, then answers the
// parked requests fn's outcome completed and resets the group's timer. It returns
// COORDINATOR_NOT_AVAILABLE during shutdown, and (without create) GROUP_ID_NOT_FOUND for a group
// that has no members state.
func (c *groupCoordinator) with(id string, create bool, fn func(e *groupEntry, g *group.Group, now time.Time) group.Outcome) error {
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return errGroupsClosed
		}
		e, ok := c.mu.groups[id]
		if !ok {
			if !create {
				c.mu.Unlock()
				return fmt.Errorf("broker: group %q: %w", id, protocol.GroupIDNotFound)
			}
			e = &groupEntry{id: id}
			e.mu.group = group.New(id, c.config)
			e.mu.joins = map[string]*parkedJoin{}
			e.mu.syncs = map[string]*parkedSync{}
			c.mu.groups[id] = e
		}
		c.mu.Unlock()
		e.mu.Lock()
		if e.mu.forgotten {
			e.mu.Unlock()
			continue
		}
		out := fn(e, e.mu.group, time.Now())
		e.deliverLocked(out)
		c.scheduleLocked(e)
		forget := forgettable(e.mu.group)
		e.mu.Unlock()
		if forget {
			c.forget(e)
		}
		return nil
	}
}

// forgettable reports whether a group has no state worth keeping in memory: deleted or expired
// (Dead), or Empty with nothing scheduled (it never had members; a group its last member left stays
// Empty until group.Config.EmptyRetention expires it).
func forgettable(g *group.Group) bool {
	return g.State() == group.Dead || g.State() == group.Empty && g.NextDeadline().IsZero()
}

// forget drops a group without members from memory (its offsets stay in the coordinator).
func (c *groupCoordinator) forget(e *groupEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	g := e.mu.group
	if e.mu.forgotten || !forgettable(g) {
		return
	}
	e.mu.forgotten = true
	if e.mu.timer != nil {
		e.mu.timer.Stop()
	}
	if c.mu.groups[e.id] == e {
		delete(c.mu.groups, e.id)
	}
}

// scheduleLocked sets the group's timer to its next deadline.
func (c *groupCoordinator) scheduleLocked(e *groupEntry) {
	next := e.mu.group.NextDeadline()
	if next.IsZero() {
		if e.mu.timer != nil {
			e.mu.timer.Stop()
		}
		return
	}
	wait := max(time.Until(next), 0)
	if e.mu.timer == nil {
		e.mu.timer = time.AfterFunc(wait, func() { c.tick(e) })
		return
	}
	e.mu.timer.Reset(wait)
}

// tick runs on the group's timer: what the group's deadlines decide (expired members removed, a
// join phase ended, a leader that never sent SyncGroup removed) answers parked requests from here.
func (c *groupCoordinator) tick(e *groupEntry) {
	c.mu.Lock()
	closed := c.mu.closed
	c.mu.Unlock()
	if closed {
		return
	}
	e.mu.Lock()
	if e.mu.forgotten {
		e.mu.Unlock()
		return
	}
	e.deliverLocked(e.mu.group.Tick(time.Now()))
	c.scheduleLocked(e)
	forget := forgettable(e.mu.group)
	e.mu.Unlock()
	if forget {
		c.forget(e)
	}
}

// deliverLocked answers the parked requests an outcome completed.
func (e *groupEntry) deliverLocked(out group.Outcome) {
	for _, resp := range out.Joins {
		if p, ok := e.mu.joins[resp.MemberID]; ok {
			delete(e.mu.joins, resp.MemberID)
			answerJoin(p.r, p.req, resp)
		}
	}
	for _, resp := range out.Syncs {
		if p, ok := e.mu.syncs[resp.MemberID]; ok {
			delete(e.mu.syncs, resp.MemberID)
			answerSync(p.r, p.req, resp)
		}
	}
}

// close answers every parked request with COORDINATOR_NOT_AVAILABLE and stops the timers, so that
// shutdown does not wait for rebalances.
func (c *groupCoordinator) close() {
	c.mu.Lock()
	c.mu.closed = true
	entries := make([]*groupEntry, 0, len(c.mu.groups))
	for _, e := range c.mu.groups {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		if e.mu.timer != nil {
			e.mu.timer.Stop()
		}
		for id, p := range e.mu.joins {
			answerJoin(p.r, p.req, group.JoinResponse{Err: errGroupsClosed, MemberID: id, Generation: -1})
		}
		for id, p := range e.mu.syncs {
			answerSync(p.r, p.req, group.SyncResponse{Err: errGroupsClosed, MemberID: id})
		}
		clear(e.mu.joins)
		clear(e.mu.syncs)
		e.mu.Unlock()
	}
}

// groupSummary is what DescribeGroups and ListGroups report of a group.
type groupSummary struct {
	state        group.State
	protocolType string
	protocol     string
	members      []group.Member
}

// describe returns the in-memory groups' summaries, by id.
func (c *groupCoordinator) describe(ids []string) map[string]groupSummary {
	c.mu.Lock()
	entries := map[string]*groupEntry{}
	for id, e := range c.mu.groups {
		if ids == nil || slices.Contains(ids, id) {
			entries[id] = e
		}
	}
	c.mu.Unlock()
	out := map[string]groupSummary{}
	for id, e := range entries {
		e.mu.Lock()
		if !e.mu.forgotten {
			g := e.mu.group
			out[id] = groupSummary{state: g.State(), protocolType: g.ProtocolType(), protocol: g.Protocol(), members: g.Members()}
		}
		e.mu.Unlock()
	}
	return out
}

// checkCoordinator answers whether this broker coordinates groups now: nil, or
// COORDINATOR_NOT_AVAILABLE (shutting down, or not the Raft leader, which holds the offsets).
func (b *Broker) checkCoordinator(groupID string) error {
	if b.closing.Load() {
		return errGroupsClosed
	}
	if groupID == "" {
		return nil // validated by the caller, or a request about every group held here
	}
	if owner := b.groupCoordinatorFor(groupID); owner != b.config.NodeID {
		return fmt.Errorf("broker: group %q is coordinated by node %d: %w", groupID, owner, protocol.NotCoordinator)
	}
	return nil
}

// groupCoordinatorFor is the broker that coordinates groupID: chosen among the live brokers by
// group.CoordinatorFor, so that only the groups of a broker that leaves move.
func (b *Broker) groupCoordinatorFor(groupID string) int32 {
	return group.CoordinatorFor(groupID, liveBrokerIDs(b.coordinator.Metadata()))
}

// newMemberID makes a member id as Kafka does: the instance id of a static member or else the
// client id, a dash and a random UUID (clients recognize a static leader by that prefix).
func newMemberID(clientID, instanceID *string) string {
	var id [16]byte
	rand.Read(id[:])
	prefix := optionalString(clientID)
	if instanceID != nil {
		prefix = *instanceID
	}
	text := hex.EncodeToString(id[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s-%s", prefix, text[:8], text[8:12], text[12:16], text[16:20], text[20:])
}

// clientHost is the member's address as Kafka reports it ("/127.0.0.1").
func clientHost(r *request) string {
	addr := r.session.conn.RemoteAddr()
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return "/" + tcp.IP.String()
	}
	if addr == nil {
		return ""
	}
	return "/" + addr.String()
}

func optionalString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// groupCommitErrorCode maps a coordinator error on committing or deleting offsets to a Kafka code.
func groupCommitErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, coordinator.ErrNotLeader):
		return protocol.NotCoordinator.Code
	case errors.Is(err, coordinator.ErrTimeout):
		return protocol.RequestTimedOut.Code
	case errors.Is(err, coordinator.ErrClosed):
		return protocol.CoordinatorNotAvailable.Code
	}
	return protocol.CodeFor(err)
}

// dropMoved forgets the in-memory groups this broker no longer coordinates (owns reports which it
// does), answering their parked joins and syncs with NOT_COORDINATOR. A group that moves away and
// back must start over at its new coordinator: kept, its old generation would accept commits from
// members that have since rejoined elsewhere, moving committed offsets back.
func (c *groupCoordinator) dropMoved(owns func(groupID string) bool) {
	c.mu.Lock()
	var moved []*groupEntry
	for id, e := range c.mu.groups {
		if !owns(id) {
			moved = append(moved, e)
			delete(c.mu.groups, id)
		}
	}
	c.mu.Unlock()
	notCoordinator := fmt.Errorf("broker: the group moved to another coordinator: %w", protocol.NotCoordinator)
	for _, e := range moved {
		e.mu.Lock()
		e.mu.forgotten = true
		if e.mu.timer != nil {
			e.mu.timer.Stop()
		}
		for id, p := range e.mu.joins {
			answerJoin(p.r, p.req, group.JoinResponse{Err: notCoordinator, MemberID: id, Generation: -1})
		}
		for id, p := range e.mu.syncs {
			answerSync(p.r, p.req, group.SyncResponse{Err: notCoordinator, MemberID: id})
		}
		clear(e.mu.joins)
		clear(e.mu.syncs)
		e.mu.Unlock()
	}
}
