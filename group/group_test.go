package group

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig() Config {
	return Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute, InitialRebalanceDelay: 100 * time.Millisecond}
}

func joinReq(memberID, newID string, protocols ...string) JoinRequest {
	req := JoinRequest{MemberID: memberID, NewMemberID: newID, ClientID: "c", SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 20 * time.Second, ProtocolType: "consumer"}
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		req.Protocols = append(req.Protocols, Protocol{Name: p, Metadata: []byte(p + "-" + newID + memberID)})
	}
	return req
}

func wantCode(t *testing.T, err error, want protocol.ErrorCode) {
	t.Helper()
	if want == protocol.None {
		if err != nil {
			t.Fatalf("error %v, want none", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %s", err, want.Name)
	}
}

func wantState(t *testing.T, g *Group, want State) {
	t.Helper()
	if g.State() != want {
		t.Fatalf("state %s, want %s", g.State(), want)
	}
	checkInvariants(t, g)
}

// checkInvariants checks the invariants listed in the package doc.
func checkInvariants(t *testing.T, g *Group) {
	t.Helper()
	if g.generation < 0 {
		t.Fatalf("generation %d", g.generation)
	}
	for instance, id := range g.staticMembers {
		if m, ok := g.members[id]; !ok || m.InstanceID != instance {
			t.Fatalf("static member %q -> %q is not a member with that instance id", instance, id)
		}
	}
	for id, m := range g.members {
		if m.InstanceID != "" && g.staticMembers[m.InstanceID] != id {
			t.Fatalf("member %q with instance %q missing from staticMembers", id, m.InstanceID)
		}
		if m.awaitingJoin && g.state != PreparingRebalance {
			t.Fatalf("member %q awaits join in %s", id, g.state)
		}
		if m.awaitingSync && g.state != CompletingRebalance {
			t.Fatalf("member %q awaits sync in %s", id, g.state)
		}
	}
	if g.leader != "" {
		if _, ok := g.members[g.leader]; !ok {
			t.Fatalf("leader %q is not a member", g.leader)
		}
	}
	if (g.state == CompletingRebalance || g.state == Stable) && g.leader == "" {
		t.Fatalf("no leader in %s", g.state)
	}
	if (g.state == CompletingRebalance) == g.syncDeadline.IsZero() {
		t.Fatalf("sync deadline %v in %s", g.syncDeadline, g.state)
	}
	if g.state != Empty && !g.emptyUntil.IsZero() {
		t.Fatalf("empty retention deadline %v in %s", g.emptyUntil, g.state)
	}
	if (g.state == Empty || g.state == Dead) && len(g.members) > 0 {
		t.Fatalf("%d members in %s", len(g.members), g.state)
	}
}

// joinFor finds the answer to memberID's parked join in out.
func joinFor(t *testing.T, out Outcome, memberID string) JoinResponse {
	t.Helper()
	for _, r := range out.Joins {
		if r.MemberID == memberID {
			return r
		}
	}
	t.Fatalf("no join answer for %q in %+v", memberID, out.Joins)
	return JoinResponse{}
}

func syncFor(t *testing.T, out Outcome, memberID string) SyncResponse {
	t.Helper()
	for _, r := range out.Syncs {
		if r.MemberID == memberID {
			return r
		}
	}
	t.Fatalf("no sync answer for %q in %+v", memberID, out.Syncs)
	return SyncResponse{}
}

// stableGroup builds a Stable group of the given member ids (joined in order, v3 style), the first
// being leader, at generation 1.
func stableGroup(t *testing.T, ids ...string) (*Group, time.Time) {
	t.Helper()
	g := New("g", testConfig())
	now := t0
	for _, id := range ids {
		_, parked, _ := g.Join(now, joinReq("", id))
		if !parked {
			t.Fatal("first join did not park")
		}
	}
	now = now.Add(100 * time.Millisecond)
	out := g.Tick(now)
	wantState(t, g, CompletingRebalance)
	if len(out.Joins) != len(ids) {
		t.Fatalf("%d join answers, want %d", len(out.Joins), len(ids))
	}
	assignments := map[string][]byte{}
	for _, id := range ids {
		assignments[id] = []byte("assigned-" + id)
	}
	for _, id := range ids[1:] {
		if _, parked, _ := g.Sync(now, SyncRequest{MemberID: id, Generation: 1}); !parked {
			t.Fatal("follower sync did not park")
		}
	}
	_, parked, out := g.Sync(now, SyncRequest{MemberID: ids[0], Generation: 1, Assignments: assignments})
	if !parked || len(out.Syncs) != len(ids) {
		t.Fatalf("leader sync: parked %v, %d answers", parked, len(out.Syncs))
	}
	wantState(t, g, Stable)
	return g, now
}

func TestFirstJoinWaitsInitialDelayThenCompletes(t *testing.T) {
	g := New("g", testConfig())
	resp, parked, out := g.Join(t0, joinReq("", "a"))
	if !parked || !out.Empty() || resp.MemberID != "a" {
		t.Fatalf("join: %+v parked %v out %+v", resp, parked, out)
	}
	wantState(t, g, PreparingRebalance) // Empty -> PreparingRebalance
	if got := g.NextDeadline(); !got.Equal(t0.Add(100 * time.Millisecond)) {
		t.Fatalf("next deadline %v, want the initial delay", got)
	}
	// A second member within the delay extends it.
	g.Join(t0.Add(50*time.Millisecond), joinReq("", "b"))
	if out := g.Tick(t0.Add(100 * time.Millisecond)); !out.Empty() {
		t.Fatalf("completed during the extended delay: %+v", out)
	}
	out = g.Tick(t0.Add(150 * time.Millisecond))
	wantState(t, g, CompletingRebalance) // PreparingRebalance -> CompletingRebalance
	a, b := joinFor(t, out, "a"), joinFor(t, out, "b")
	if a.Generation != 1 || a.Leader != "a" || len(a.Members) != 2 || a.Protocol != "range" || a.ProtocolType != "consumer" {
		t.Fatalf("leader answer %+v", a)
	}
	if b.Leader != "a" || len(b.Members) != 0 || b.Generation != 1 {
		t.Fatalf("follower answer %+v", b)
	}
}

func TestMemberIDRequired(t *testing.T) {
	g := New("g", Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute})
	req := joinReq("", "m1")
	req.RequireKnownMemberID = true
	resp, parked, _ := g.Join(t0, req)
	wantCode(t, resp.Err, protocol.MemberIDRequired)
	if parked || resp.MemberID != "m1" {
		t.Fatalf("%+v parked %v", resp, parked)
	}
	wantState(t, g, Empty)
	// Rejoining with the given id joins.
	_, parked, out := g.Join(t0, joinReq("m1", "unused"))
	if !parked {
		t.Fatal("rejoin with the id did not park")
	}
	if r := joinFor(t, out, "m1"); r.Err != nil || r.Generation != 1 {
		t.Fatalf("%+v", r)
	}
	// An unknown id is refused.
	resp, _, _ = g.Join(t0, joinReq("nobody", "x"))
	wantCode(t, resp.Err, protocol.UnknownMemberID)
}

func TestPendingMemberHoldsJoinPhaseUntilItLapses(t *testing.T) {
	g, now := stableGroup(t, "a")
	req := joinReq("", "p")
	req.RequireKnownMemberID = true
	resp, _, _ := g.Join(now, req)
	wantCode(t, resp.Err, protocol.MemberIDRequired)
	wantState(t, g, Stable) // a pending id alone does not rebalance
	// a rejoins (as leader that rebalances); the pending id holds the phase open.
	_, parked, out := g.Join(now, joinReq("a", ""))
	if !parked || !out.Empty() {
		t.Fatalf("parked %v out %+v", parked, out)
	}
	wantState(t, g, PreparingRebalance)
	out = g.Tick(now.Add(10 * time.Second)) // the pending id's session timeout
	wantState(t, g, CompletingRebalance)
	if r := joinFor(t, out, "a"); r.Generation != 2 {
		t.Fatalf("%+v", r)
	}
}

func TestInvalidJoins(t *testing.T) {
	g, now := stableGroup(t, "a")
	req := joinReq("", "x")
	req.SessionTimeout = 500 * time.Millisecond
	resp, _, _ := g.Join(now, req)
	wantCode(t, resp.Err, protocol.InvalidSessionTimeout)
	resp, _, _ = g.Join(now, joinReq("", "x", "roundrobin"))
	wantCode(t, resp.Err, protocol.InconsistentGroupProtocol)
	req = joinReq("", "x")
	req.ProtocolType = "connect"
	resp, _, _ = g.Join(now, req)
	wantCode(t, resp.Err, protocol.InconsistentGroupProtocol)
	req = joinReq("", "x")
	req.Protocols = nil
	resp, _, _ = g.Join(now, req)
	wantCode(t, resp.Err, protocol.InconsistentGroupProtocol)
	wantState(t, g, Stable)
}

func TestStableRebalancesWhenAMemberJoins(t *testing.T) {
	g, now := stableGroup(t, "a", "b")
	_, parked, _ := g.Join(now, joinReq("", "c"))
	if !parked {
		t.Fatal("new member did not park")
	}
	wantState(t, g, PreparingRebalance) // Stable -> PreparingRebalance
	wantCode(t, g.Heartbeat(now, "a", "", 1), protocol.RebalanceInProgress)
	wantCode(t, g.CheckCommit(now, "a", "", 1), protocol.None) // commit before rejoining
	_, _, out := g.Join(now, joinReq("a", ""))
	if !out.Empty() {
		t.Fatal("completed before b rejoined")
	}
	_, _, out = g.Join(now, joinReq("b", ""))
	wantState(t, g, CompletingRebalance)
	if len(out.Joins) != 3 || joinFor(t, out, "c").Generation != 2 || joinFor(t, out, "a").Leader != "a" {
		t.Fatalf("%+v", out.Joins)
	}
	// The old generation is over.
	wantCode(t, g.Heartbeat(now, "a", "", 1), protocol.IllegalGeneration)
	wantCode(t, g.CheckCommit(now, "a", "", 2), protocol.RebalanceInProgress)
	resp, _, _ := g.Sync(now, SyncRequest{MemberID: "a", Generation: 1})
	wantCode(t, resp.Err, protocol.IllegalGeneration)
}

func TestUnchangedRejoinInStableGetsCurrentGeneration(t *testing.T) {
	g, now := stableGroup(t, "a", "b")
	resp, parked, _ := g.Join(now, joinReq("b", ""))
	if parked || resp.Err != nil || resp.Generation != 1 || resp.Leader != "a" {
		t.Fatalf("%+v parked %v", resp, parked)
	}
	wantState(t, g, Stable)
	// The leader rejoining always rebalances (it may want a new assignment).
	if _, parked, _ := g.Join(now, joinReq("a", "")); !parked {
		t.Fatal("leader rejoin did not park")
	}
	wantState(t, g, PreparingRebalance)
}

func TestSyncPhases(t *testing.T) {
	g, now := stableGroup(t, "a", "b")
	resp, parked, _ := g.Sync(now, SyncRequest{MemberID: "b", Generation: 1})
	if parked || string(resp.Assignment) != "assigned-b" {
		t.Fatalf("stable sync %+v", resp)
	}
	resp, _, _ = g.Sync(now, SyncRequest{MemberID: "b", Generation: 1, Protocol: "sticky"})
	wantCode(t, resp.Err, protocol.InconsistentGroupProtocol)
	resp, _, _ = g.Sync(now, SyncRequest{MemberID: "zz", Generation: 1})
	wantCode(t, resp.Err, protocol.UnknownMemberID)
	g.Join(now, joinReq("", "c"))
	resp, _, _ = g.Sync(now, SyncRequest{MemberID: "b", Generation: 1})
	wantCode(t, resp.Err, protocol.RebalanceInProgress)
	// Naming its generation's protocol, as clients send from SyncGroup v5: still only "rejoin".
	// INCONSISTENT_GROUP_PROTOCOL here stopped a member of ours for good when a franz-go member's
	// join began a rebalance between our JoinGroup and SyncGroup (TestGroupMixedWithFranzGo).
	resp, _, _ = g.Sync(now, SyncRequest{MemberID: "b", Generation: 1, ProtocolType: "consumer", Protocol: "range"})
	wantCode(t, resp.Err, protocol.RebalanceInProgress)
}

func TestLeaveDuringCompletingRebalanceAnswersParkedSyncs(t *testing.T) {
	g := New("g", Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute})
	g.Join(t0, joinReq("", "a"))
	wantState(t, g, CompletingRebalance)
	g.Join(t0, joinReq("", "b"))
	g.Join(t0, joinReq("a", ""))
	wantState(t, g, CompletingRebalance)
	_, parked, _ := g.Sync(t0, SyncRequest{MemberID: "b", Generation: 2})
	if !parked {
		t.Fatal("sync did not park")
	}
	errs, out := g.Leave(t0, []LeavingMember{{MemberID: "a"}, {MemberID: "nobody"}})
	wantCode(t, errs[0], protocol.None)
	wantCode(t, errs[1], protocol.UnknownMemberID)
	wantState(t, g, PreparingRebalance) // CompletingRebalance -> PreparingRebalance
	wantCode(t, syncFor(t, out, "b").Err, protocol.RebalanceInProgress)
	_, _, out = g.Join(t0, joinReq("b", ""))
	wantState(t, g, CompletingRebalance)
	if r := joinFor(t, out, "b"); r.Leader != "b" || r.Generation != 3 {
		t.Fatalf("%+v", r)
	}
}

func TestLastMemberLeavingEmptiesGroup(t *testing.T) {
	g, now := stableGroup(t, "a")
	errs, _ := g.Leave(now, []LeavingMember{{MemberID: "a"}})
	wantCode(t, errs[0], protocol.None)
	wantState(t, g, Empty) // Stable -> PreparingRebalance -> Empty
	if g.Generation() != 2 || g.Protocol() != "" {
		t.Fatalf("generation %d protocol %q", g.Generation(), g.Protocol())
	}
	wantCode(t, g.CheckCommit(now, "", "", -1), protocol.None)
	wantCode(t, g.CheckCommit(now, "a", "", 1), protocol.UnknownMemberID)
}

func TestSessionExpiryRebalances(t *testing.T) {
	g, now := stableGroup(t, "a", "b")
	now = now.Add(6 * time.Second)
	wantCode(t, g.Heartbeat(now, "b", "", 1), protocol.None)
	if next := g.NextDeadline(); !next.Equal(now.Add(-6*time.Second + 10*time.Second)) {
		t.Fatalf("next deadline %v", next)
	}
	out := g.Tick(now.Add(4 * time.Second)) // a's session ends
	wantState(t, g, PreparingRebalance)
	if !out.Empty() {
		t.Fatalf("%+v", out)
	}
	if _, ok := g.members["a"]; ok {
		t.Fatal("a still a member")
	}
	_, _, out = g.Join(now.Add(4*time.Second), joinReq("b", ""))
	if r := joinFor(t, out, "b"); r.Leader != "b" {
		t.Fatalf("%+v", r)
	}
}

func TestRebalanceDeadlineRemovesMembersThatDidNotRejoin(t *testing.T) {
	g, now := stableGroup(t, "a", "b")
	g.Join(now, joinReq("", "c"))
	g.Heartbeat(now.Add(5*time.Second), "b", "", 1)
	g.Heartbeat(now.Add(9*time.Second), "b", "", 1)
	g.Heartbeat(now.Add(15*time.Second), "b", "", 1)
	_, _, out := g.Join(now.Add(16*time.Second), joinReq("b", ""))
	// a neither heartbeats nor rejoins: its session ends at 10 s and the phase completes then.
	out = g.Tick(now.Add(16 * time.Second))
	wantState(t, g, CompletingRebalance)
	if len(out.Joins) != 2 || g.Len() != 2 {
		t.Fatalf("%d answers, %d members", len(out.Joins), g.Len())
	}
	// Without session expiry, the rebalance deadline applies: a member parked in join keeps its
	// session, one that keeps heartbeating but never rejoins is dropped at the deadline.
	g2, now2 := stableGroup(t, "a", "b")
	g2.Join(now2, joinReq("", "c"))
	for s := 1; s < 20; s++ {
		g2.Heartbeat(now2.Add(time.Duration(s)*time.Second), "a", "", 1)
	}
	g2.Join(now2, joinReq("b", ""))
	out = g2.Tick(now2.Add(19 * time.Second))
	wantState(t, g2, PreparingRebalance)
	out = g2.Tick(now2.Add(20 * time.Second))
	wantState(t, g2, CompletingRebalance)
	if _, ok := g2.members["a"]; ok || len(out.Joins) != 2 {
		t.Fatalf("a kept or %d answers", len(out.Joins))
	}
}

// completingGroup builds a group of the given member ids in CompletingRebalance at generation 1,
// the first being leader, each member with the given rebalance timeout; it returns the time the
// join phase ended.
func completingGroup(t *testing.T, rebalanceTimeouts map[string]time.Duration, ids ...string) (*Group, time.Time) {
	t.Helper()
	g := New("g", testConfig())
	for _, id := range ids {
		req := joinReq("", id)
		req.RebalanceTimeout = rebalanceTimeouts[id]
		g.Join(t0, req)
	}
	now := t0.Add(100 * time.Millisecond)
	if out := g.Tick(now); len(out.Joins) != len(ids) {
		t.Fatalf("%d join answers, want %d", len(out.Joins), len(ids))
	}
	wantState(t, g, CompletingRebalance)
	return g, now
}

func TestSyncDeadlineRemovesMembersThatDidNotSync(t *testing.T) {
	timeouts := map[string]time.Duration{"a": 5 * time.Second, "b": 3 * time.Second, "c": time.Second}
	g, now := completingGroup(t, timeouts, "a", "b", "c")
	deadline := now.Add(5 * time.Second) // the largest rebalance timeout, not the leader's or the first's
	if _, parked, _ := g.Sync(now, SyncRequest{MemberID: "b", Generation: 1}); !parked {
		t.Fatal("follower sync did not park")
	}
	// The leader and c stay alive by heartbeats, so no session ends: only the sync deadline can.
	wantCode(t, g.Heartbeat(now.Add(4*time.Second), "a", "", 1), protocol.None)
	wantCode(t, g.Heartbeat(now.Add(4*time.Second), "c", "", 1), protocol.None)
	if next := g.NextDeadline(); !next.Equal(deadline) {
		t.Fatalf("next deadline %v, want the sync deadline %v", next, deadline)
	}
	if out := g.Tick(deadline.Add(-time.Nanosecond)); !out.Empty() {
		t.Fatalf("ticked before the sync deadline: %+v", out)
	}
	wantState(t, g, CompletingRebalance)

	out := g.Tick(deadline)
	wantState(t, g, PreparingRebalance) // CompletingRebalance -> PreparingRebalance
	if len(out.Syncs) != 1 || len(out.Joins) != 0 {
		t.Fatalf("%+v", out)
	}
	wantCode(t, syncFor(t, out, "b").Err, protocol.RebalanceInProgress)
	if g.Len() != 1 || g.members["b"] == nil || g.Leader() != "" || g.Generation() != 1 {
		t.Fatalf("members %v leader %q generation %d", g.Members(), g.Leader(), g.Generation())
	}
	wantCode(t, g.Heartbeat(deadline, "a", "", 1), protocol.UnknownMemberID)
	wantCode(t, g.Heartbeat(deadline, "b", "", 1), protocol.RebalanceInProgress)

	// b rejoins and leads the next generation.
	_, parked, out := g.Join(deadline, joinReq("b", ""))
	if r := joinFor(t, out, "b"); !parked || r.Leader != "b" || r.Generation != 2 {
		t.Fatalf("parked %v %+v", parked, r)
	}
	wantState(t, g, CompletingRebalance)
	if !g.syncDeadline.Equal(deadline.Add(20 * time.Second)) { // joinReq's rebalance timeout
		t.Fatalf("sync deadline %v", g.syncDeadline)
	}
}

func TestSyncDeadlineWithNobodySyncedEmptiesGroup(t *testing.T) {
	g, now := completingGroup(t, map[string]time.Duration{"a": 5 * time.Second, "b": 5 * time.Second}, "a", "b")
	wantCode(t, g.Heartbeat(now.Add(4*time.Second), "a", "", 1), protocol.None)
	wantCode(t, g.Heartbeat(now.Add(4*time.Second), "b", "", 1), protocol.None)
	out := g.Tick(now.Add(5 * time.Second))
	wantState(t, g, Empty) // CompletingRebalance -> PreparingRebalance -> Empty
	if !out.Empty() || g.Len() != 0 || g.Generation() != 2 || !g.NextDeadline().IsZero() {
		t.Fatalf("out %+v, %d members, generation %d", out, g.Len(), g.Generation())
	}
}

func TestLeaderSyncBeforeDeadlineClearsIt(t *testing.T) {
	g, now := completingGroup(t, map[string]time.Duration{"a": 5 * time.Second, "b": 5 * time.Second}, "a", "b")
	g.Sync(now, SyncRequest{MemberID: "b", Generation: 1})
	_, _, out := g.Sync(now.Add(4*time.Second), SyncRequest{MemberID: "a", Generation: 1, Assignments: map[string][]byte{"b": []byte("pb")}})
	wantState(t, g, Stable)
	if string(syncFor(t, out, "b").Assignment) != "pb" {
		t.Fatalf("%+v", out)
	}
	// Only sessions are left to expire: b's, 10 s after the leader's sync answered it.
	if next := g.NextDeadline(); !next.Equal(now.Add(14 * time.Second)) {
		t.Fatalf("next deadline %v", next)
	}
	if out := g.Tick(now.Add(5 * time.Second)); !out.Empty() {
		t.Fatalf("%+v", out)
	}
	wantState(t, g, Stable)
}

func TestStaticMemberRejoinsWithoutRebalanceAndFencesOldID(t *testing.T) {
	g := New("g", Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute})
	for _, id := range []string{"a", "b"} {
		req := joinReq("", id)
		req.InstanceID = "instance-" + id
		g.Join(t0, req)
		if id == "a" {
			wantState(t, g, CompletingRebalance)
			g.Sync(t0, SyncRequest{MemberID: "a", Generation: 1, Assignments: map[string][]byte{"a": []byte("x")}})
		}
	}
	g.Join(t0, JoinRequest{}) // invalid, ignored
	req := joinReq("a", "")
	req.InstanceID = "instance-a"
	g.Join(t0, req)
	wantState(t, g, CompletingRebalance)
	_, _, out := g.Sync(t0, SyncRequest{MemberID: "a", InstanceID: "instance-a", Generation: 2,
		Assignments: map[string][]byte{"a": []byte("pa"), "b": []byte("pb")}})
	wantState(t, g, Stable)
	if len(out.Syncs) != 1 {
		t.Fatalf("%+v", out)
	}

	// b restarts: same instance id, no member id.
	req = joinReq("", "b2")
	req.InstanceID = "instance-b"
	req.Protocols = []Protocol{{Name: "range", Metadata: []byte("range-b")}} // unchanged
	resp, parked, _ := g.Join(t0, req)
	if parked || resp.Err != nil || resp.MemberID != "b2" || resp.Generation != 2 || resp.Leader != "a" {
		t.Fatalf("static rejoin %+v parked %v", resp, parked)
	}
	wantState(t, g, Stable)
	sync, _, _ := g.Sync(t0, SyncRequest{MemberID: "b2", InstanceID: "instance-b", Generation: 2})
	if string(sync.Assignment) != "pb" {
		t.Fatalf("static member lost its assignment: %+v", sync)
	}
	wantCode(t, g.Heartbeat(t0, "b", "instance-b", 2), protocol.FencedInstanceID)
	wantCode(t, g.CheckCommit(t0, "b", "instance-b", 2), protocol.FencedInstanceID)
	wantCode(t, g.Heartbeat(t0, "b", "", 2), protocol.UnknownMemberID)
	errs, _ := g.Leave(t0, []LeavingMember{{MemberID: "b", InstanceID: "instance-b"}})
	wantCode(t, errs[0], protocol.FencedInstanceID)

	// The leader restarts: no rebalance, and it is told to skip assigning.
	req = joinReq("", "a2")
	req.InstanceID = "instance-a"
	req.Protocols = []Protocol{{Name: "range", Metadata: []byte("range-a")}}
	resp, parked, _ = g.Join(t0, req)
	if parked || !resp.SkipAssignment || resp.Leader != "a2" || len(resp.Members) != 2 {
		t.Fatalf("static leader rejoin %+v", resp)
	}
	wantState(t, g, Stable)

	// A static member replaced while its join is parked: the old join is fenced.
	g.Join(t0, joinReq("", "c")) // rebalance
	req = joinReq("b2", "")
	req.InstanceID = "instance-b"
	g.Join(t0, req)
	req = joinReq("", "b3")
	req.InstanceID = "instance-b"
	_, parked, out = g.Join(t0, req)
	if !parked {
		t.Fatal("static rejoin during a rebalance did not park")
	}
	wantCode(t, joinFor(t, out, "b2").Err, protocol.FencedInstanceID)
	wantState(t, g, PreparingRebalance)

	// Leaving by instance id.
	errs, _ = g.Leave(t0, []LeavingMember{{InstanceID: "instance-b"}, {InstanceID: "unknown"}})
	wantCode(t, errs[0], protocol.None)
	wantCode(t, errs[1], protocol.UnknownMemberID)
	checkInvariants(t, g)
}

func TestProtocolSelection(t *testing.T) {
	g := New("g", Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute, InitialRebalanceDelay: time.Second})
	g.Join(t0, joinReq("", "a", "sticky", "range"))
	g.Join(t0, joinReq("", "b", "range", "sticky"))
	g.Join(t0, joinReq("", "c", "range", "roundrobin", "sticky"))
	resp, _, _ := g.Join(t0, joinReq("", "d", "roundrobin"))
	wantCode(t, resp.Err, protocol.InconsistentGroupProtocol)
	out := g.Tick(t0.Add(time.Second))
	if r := joinFor(t, out, "a"); r.Protocol != "range" || string(r.Members[0].Metadata) != "range-a" {
		t.Fatalf("%+v", r)
	}
}

func TestDelete(t *testing.T) {
	g, now := stableGroup(t, "a")
	wantCode(t, g.Delete(), protocol.NonEmptyGroup)
	g.Leave(now, []LeavingMember{{MemberID: "a"}})
	wantCode(t, g.Delete(), protocol.None)
	wantState(t, g, Dead) // Empty -> Dead
	resp, _, _ := g.Join(now, joinReq("", "b"))
	wantCode(t, resp.Err, protocol.CoordinatorNotAvailable)
	wantCode(t, g.Heartbeat(now, "a", "", 1), protocol.CoordinatorNotAvailable)
	if !g.NextDeadline().IsZero() || !g.Tick(now.Add(time.Hour)).Empty() {
		t.Fatal("a dead group has deadlines")
	}
}

func TestTransitionTableRefusesOthers(t *testing.T) {
	for from := Empty; from <= Dead; from++ {
		for to := Empty; to <= Dead; to++ {
			allowed := false
			for _, s := range allowedTransitions[from] {
				allowed = allowed || s == to
			}
			g := &Group{id: "g", state: from}
			func() {
				defer func() {
					if r := recover(); (r != nil) == allowed {
						t.Errorf("%s -> %s: allowed %v, panicked %v", from, to, allowed, r)
					}
				}()
				g.transition(to)
			}()
		}
		if name, ok := ParseState(from.String()); !ok || name != from {
			t.Errorf("ParseState(%s)", from)
		}
	}
}

// TestRandomOperations drives a group with random joins, syncs, heartbeats, leaves, commits and
// time, checking the invariants after each step and that every parked request is answered at most
// once and only while parked.
func TestRandomOperations(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 1))
		config := testConfig()
		if seed%2 == 1 {
			config.EmptyRetention = 15 * time.Second // emptied groups are kept, then expire
		}
		g := New("g", config)
		now := t0
		parkedJoins, parkedSyncs := map[string]bool{}, map[string]bool{}
		deliver := func(out Outcome) {
			for _, r := range out.Joins {
				if !parkedJoins[r.MemberID] {
					t.Fatalf("seed %d: join answer for %q which is not parked", seed, r.MemberID)
				}
				delete(parkedJoins, r.MemberID)
			}
			for _, r := range out.Syncs {
				if !parkedSyncs[r.MemberID] {
					t.Fatalf("seed %d: sync answer for %q which is not parked", seed, r.MemberID)
				}
				delete(parkedSyncs, r.MemberID)
			}
		}
		known := []string{}
		nextID := 0
		for step := 0; step < 400; step++ {
			pick := func() string {
				if len(known) == 0 || rng.IntN(10) == 0 {
					return fmt.Sprintf("ghost-%d", rng.IntN(3))
				}
				return known[rng.IntN(len(known))]
			}
			switch op := rng.IntN(7); op {
			case 0, 1:
				id := ""
				if rng.IntN(2) == 0 {
					id = pick()
				}
				nextID++
				req := joinReq(id, fmt.Sprintf("m%d", nextID))
				req.RequireKnownMemberID = rng.IntN(2) == 0
				// Rebalance timeouts both shorter and longer than the 10 s session, so that join
				// phases and waits for the leader's SyncGroup end by their deadlines too.
				req.RebalanceTimeout = time.Duration(1+rng.IntN(20)) * time.Second
				if rng.IntN(3) == 0 {
					req.InstanceID = fmt.Sprintf("i%d", rng.IntN(4))
				}
				resp, parked, out := g.Join(now, req)
				if parked {
					parkedJoins[resp.MemberID] = true // a second join of a parked member replaces the first
				}
				if resp.MemberID != "" {
					known = append(known, resp.MemberID)
				}
				deliver(out)
			case 2:
				id := pick()
				if parkedSyncs[id] {
					continue
				}
				assignments := map[string][]byte{}
				for _, k := range known {
					assignments[k] = []byte(k)
				}
				resp, parked, out := g.Sync(now, SyncRequest{MemberID: id, Generation: g.Generation(), Assignments: assignments})
				if parked {
					parkedSyncs[resp.MemberID] = true
				}
				deliver(out)
			case 3:
				g.Heartbeat(now, pick(), "", g.Generation())
			case 4:
				_, out := g.Leave(now, []LeavingMember{{MemberID: pick()}})
				deliver(out)
			case 5:
				g.CheckCommit(now, pick(), "", g.Generation())
			case 6:
				now = now.Add(time.Duration(rng.IntN(12000)) * time.Millisecond)
				deliver(g.Tick(now))
				if g.state == Empty && !g.emptyUntil.IsZero() && !now.Before(g.emptyUntil) {
					t.Fatalf("seed %d step %d: Empty past its retention (%v) after a tick at %v", seed, step, g.emptyUntil, now)
				}
			}
			checkInvariants(t, g)
			for id := range parkedJoins {
				if m, ok := g.members[id]; !ok || !m.awaitingJoin {
					t.Fatalf("seed %d step %d: parked join of %q is not awaited by the group", seed, step, id)
				}
			}
			for id := range parkedSyncs {
				if m, ok := g.members[id]; !ok || !m.awaitingSync {
					t.Fatalf("seed %d step %d: parked sync of %q is not awaited by the group", seed, step, id)
				}
			}
		}
	}
}
