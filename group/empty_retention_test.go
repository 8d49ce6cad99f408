package group

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

func TestEmptiedGroupIsRetainedThenExpires(t *testing.T) {
	config := testConfig()
	config.EmptyRetention = time.Minute
	g := New("g", config)
	if !g.NextDeadline().IsZero() {
		t.Fatal("a group that never had members has a deadline")
	}
	_, _, _ = g.Join(t0, joinReq("", "a"))
	now := t0.Add(100 * time.Millisecond)
	g.Tick(now)
	_, _, _ = g.Sync(now, SyncRequest{MemberID: "a", Generation: 1, Assignments: map[string][]byte{"a": []byte("x")}})
	wantState(t, g, Stable)

	errs, _ := g.Leave(now, []LeavingMember{{MemberID: "a"}})
	wantCode(t, errs[0], protocol.None)
	wantState(t, g, Empty)
	if g.ProtocolType() != "consumer" {
		t.Fatalf("protocol type %q after emptying, want the members' (consumer)", g.ProtocolType())
	}
	if next := g.NextDeadline(); !next.Equal(now.Add(time.Minute)) {
		t.Fatalf("next deadline %v, want the end of the retention %v", next, now.Add(time.Minute))
	}
	g.Tick(now.Add(time.Minute - time.Nanosecond))
	wantState(t, g, Empty)
	checkInvariants(t, g)
	g.Tick(now.Add(time.Minute))
	wantState(t, g, Dead) // Empty -> Dead: expired
	if !g.NextDeadline().IsZero() {
		t.Fatal("a dead group has a deadline")
	}
}

func TestJoinCancelsEmptyRetention(t *testing.T) {
	config := testConfig()
	config.EmptyRetention = time.Minute
	g := New("g", config)
	_, _, _ = g.Join(t0, joinReq("", "a"))
	now := t0.Add(100 * time.Millisecond)
	g.Tick(now)
	g.Leave(now, []LeavingMember{{MemberID: "a"}})
	wantState(t, g, Empty)
	_, _, _ = g.Join(now.Add(time.Second), joinReq("", "b"))
	wantState(t, g, PreparingRebalance)
	checkInvariants(t, g)
	g.Tick(now.Add(time.Second + 100*time.Millisecond))
	wantState(t, g, CompletingRebalance)
	g.Tick(now.Add(2 * time.Minute)) // past the old retention: the member's session ends instead
	if g.State() == Dead {
		t.Fatal("a group rejoined after emptying expired on the old retention")
	}
}

func TestZeroRetentionSchedulesNothing(t *testing.T) {
	g, now := stableGroup(t, "a")
	g.Leave(now, []LeavingMember{{MemberID: "a"}})
	wantState(t, g, Empty)
	if !g.NextDeadline().IsZero() {
		t.Fatalf("deadline %v without retention", g.NextDeadline())
	}
}
