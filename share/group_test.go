package share

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

func testGroupConfig() GroupConfig {
	return GroupConfig{SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second, MaxMembers: 3}
}

var testTopics = map[string]TopicInfo{"jobs": {ID: [16]byte{1}, Partitions: 2}, "other": {ID: [16]byte{2}, Partitions: 1}}

func join(t *testing.T, g *Group, now time.Time, member string, topics ...string) HeartbeatResponse {
	t.Helper()
	resp, err := g.Heartbeat(now, HeartbeatRequest{MemberID: member, MemberEpoch: 0, Subscribed: topics}, testTopics)
	if err != nil {
		t.Fatalf("join %s: %v", member, err)
	}
	if !resp.HasAssignment || resp.MemberEpoch <= 0 {
		t.Fatalf("join %s: %+v", member, resp)
	}
	return resp
}

func checkGroup(t *testing.T, g *Group) {
	t.Helper()
	for id, m := range g.members {
		if m.Epoch > g.epoch || m.ID != id {
			t.Fatalf("member %q epoch %d above group epoch %d", id, m.Epoch, g.epoch)
		}
	}
}

func TestShareMembersAllGetEveryPartition(t *testing.T) {
	g := NewGroup("q", testGroupConfig(), 0)
	a := join(t, g, t0, "a", "jobs")
	b := join(t, g, t0, "b", "jobs", "other", "missing")
	if len(a.Assignment) != 1 || a.Assignment[0].Topic != "jobs" || len(a.Assignment[0].Partitions) != 2 {
		t.Fatalf("a assigned %+v", a.Assignment)
	}
	if len(b.Assignment) != 2 || b.Assignment[1].Topic != "other" || b.Assignment[1].ID != [16]byte{2} {
		t.Fatalf("b assigned %+v", b.Assignment)
	}
	if g.State() != "Stable" || len(g.Members()) != 2 {
		t.Fatalf("state %s members %d", g.State(), len(g.Members()))
	}
	// A steady heartbeat carries no assignment.
	resp, err := g.Heartbeat(t0, HeartbeatRequest{MemberID: "a", MemberEpoch: a.MemberEpoch}, testTopics)
	wantCode(t, err, protocol.None)
	if resp.HasAssignment || resp.MemberEpoch != a.MemberEpoch {
		t.Fatalf("steady heartbeat %+v", resp)
	}
	checkGroup(t, g)
}

func TestShareAssignmentFollowsTopicsAndSubscriptions(t *testing.T) {
	g := NewGroup("q", testGroupConfig(), 7)
	a := join(t, g, t0, "a", "jobs")
	if a.MemberEpoch <= 7 {
		t.Fatalf("epoch %d did not resume above the persisted 7", a.MemberEpoch)
	}
	grown := map[string]TopicInfo{"jobs": {ID: [16]byte{1}, Partitions: 3}}
	resp, err := g.Heartbeat(t0, HeartbeatRequest{MemberID: "a", MemberEpoch: a.MemberEpoch}, grown)
	wantCode(t, err, protocol.None)
	if !resp.HasAssignment || resp.MemberEpoch <= a.MemberEpoch || len(resp.Assignment[0].Partitions) != 3 {
		t.Fatalf("after partitions were added: %+v", resp)
	}
	resp2, err := g.Heartbeat(t0, HeartbeatRequest{MemberID: "a", MemberEpoch: resp.MemberEpoch, Subscribed: []string{"other"}}, testTopics)
	wantCode(t, err, protocol.None)
	if !resp2.HasAssignment || resp2.Assignment[0].Topic != "other" {
		t.Fatalf("after resubscribing: %+v", resp2)
	}
	checkGroup(t, g)
}

func TestShareHeartbeatRefusals(t *testing.T) {
	g := NewGroup("q", testGroupConfig(), 0)
	hb := func(req HeartbeatRequest) error {
		_, err := g.Heartbeat(t0, req, testTopics)
		return err
	}
	wantCode(t, hb(HeartbeatRequest{MemberEpoch: 0, Subscribed: []string{"jobs"}}), protocol.InvalidRequest)
	wantCode(t, hb(HeartbeatRequest{MemberID: "a", MemberEpoch: 0}), protocol.InvalidRequest)
	wantCode(t, hb(HeartbeatRequest{MemberID: "a", MemberEpoch: 0, Subscribed: []string{}}), protocol.InvalidRequest)
	wantCode(t, hb(HeartbeatRequest{MemberID: "a", MemberEpoch: 3}), protocol.UnknownMemberID)
	wantCode(t, hb(HeartbeatRequest{MemberID: "a", MemberEpoch: -1}), protocol.UnknownMemberID)
	wantCode(t, hb(HeartbeatRequest{MemberID: "a", MemberEpoch: -2}), protocol.InvalidRequest)
	a := join(t, g, t0, "a", "jobs")
	wantCode(t, hb(HeartbeatRequest{MemberID: "a", MemberEpoch: a.MemberEpoch + 1}), protocol.FencedMemberEpoch)
	join(t, g, t0, "b", "jobs")
	join(t, g, t0, "c", "jobs")
	wantCode(t, hb(HeartbeatRequest{MemberID: "d", MemberEpoch: 0, Subscribed: []string{"jobs"}}), protocol.GroupMaxSizeReached)
	// The previous epoch is still accepted (its answer may have been lost) and gets the assignment.
	grown := map[string]TopicInfo{"jobs": {ID: [16]byte{1}, Partitions: 3}}
	resp, _ := g.Heartbeat(t0, HeartbeatRequest{MemberID: "a", MemberEpoch: a.MemberEpoch}, grown)
	again, err := g.Heartbeat(t0, HeartbeatRequest{MemberID: "a", MemberEpoch: a.MemberEpoch}, grown)
	wantCode(t, err, protocol.None)
	if !again.HasAssignment || again.MemberEpoch != resp.MemberEpoch {
		t.Fatalf("heartbeat at the previous epoch: %+v", again)
	}
	checkGroup(t, g)
}

func TestShareMembersLeaveAndExpire(t *testing.T) {
	g := NewGroup("q", testGroupConfig(), 0)
	join(t, g, t0, "a", "jobs")
	join(t, g, t0.Add(5*time.Second), "b", "jobs")
	if next := g.NextDeadline(); !next.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next deadline %v", next)
	}
	resp, err := g.Heartbeat(t0, HeartbeatRequest{MemberID: "b", MemberEpoch: -1}, testTopics)
	if err != nil || resp.MemberEpoch != -1 {
		t.Fatalf("leave: %+v %v", resp, err)
	}
	if expired := g.Tick(t0.Add(9 * time.Second)); len(expired) != 0 {
		t.Fatalf("expired early: %v", expired)
	}
	epoch := g.Epoch()
	if expired := g.Tick(t0.Add(10 * time.Second)); len(expired) != 1 || expired[0] != "a" {
		t.Fatalf("expired %v", expired)
	}
	if g.State() != "Empty" || g.Epoch() <= epoch || !g.NextDeadline().IsZero() {
		t.Fatalf("state %s epoch %d", g.State(), g.Epoch())
	}
	// A member that lost its membership rejoins with its id at epoch 0.
	join(t, g, t0.Add(11*time.Second), "a", "jobs")
	if !g.Remove("a") || g.Remove("a") {
		t.Fatal("remove")
	}
}
