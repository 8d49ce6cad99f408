package consumergroup

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// client is a model member: it owns what it was last told, and reports it.
type client struct {
	id    string
	epoch int32
	owned Assignment
}

var t1, t2 = [16]byte{1}, [16]byte{2}

func topics() map[string]TopicInfo {
	return map[string]TopicInfo{"a": {ID: t1, Partitions: 6}, "b": {ID: t2, Partitions: 4}, "other": {ID: [16]byte{3}, Partitions: 2}}
}

func (c *client) beat(t *testing.T, g *Group, now time.Time, req HeartbeatRequest) {
	t.Helper()
	req.MemberID, req.MemberEpoch = c.id, c.epoch
	if c.epoch > 0 {
		req.Owned = c.owned.Clone()
	}
	resp, err := g.Heartbeat(now, req, topics())
	if err != nil {
		t.Fatalf("%s heartbeat: %v", c.id, err)
	}
	c.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		c.owned = resp.Assignment
	}
}

// checkExclusive asserts no partition is owned by two clients.
func checkExclusive(t *testing.T, clients []*client) {
	t.Helper()
	owner := map[TopicPartition]string{}
	for _, c := range clients {
		for tp := range c.owned.set() {
			if other, ok := owner[tp]; ok {
				t.Fatalf("%v owned by %s and %s", tp, other, c.id)
			}
			owner[tp] = c.id
		}
	}
}

func TestGroupConvergesWithoutDoubleOwnership(t *testing.T) {
	for _, assignor := range []string{AssignorUniform, AssignorRange} {
		t.Run(assignor, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			g := New("g", DefaultConfig())
			now := time.Unix(0, 0)
			var clients []*client
			joined := 0
			join := func() {
				joined++
				c := &client{id: fmt.Sprintf("m%d", joined)}
				clients = append(clients, c)
				c.beat(t, g, now, HeartbeatRequest{SubscribedNames: []string{"a", "b"}, ServerAssignor: &assignor})
			}
			for step := range 300 {
				now = now.Add(100 * time.Millisecond)
				switch {
				case step%60 == 0 && len(clients) < 6:
					join()
				case step%97 == 0 && len(clients) > 1:
					i := rng.IntN(len(clients))
					c := clients[i]
					if _, err := g.Heartbeat(now, HeartbeatRequest{MemberID: c.id, MemberEpoch: -1}, topics()); err != nil {
						t.Fatal(err)
					}
					clients = append(clients[:i], clients[i+1:]...)
				default:
					c := clients[rng.IntN(len(clients))]
					c.beat(t, g, now, HeartbeatRequest{})
				}
				checkExclusive(t, clients)
			}
			for range 10 {
				for _, c := range clients {
					c.beat(t, g, now, HeartbeatRequest{})
				}
			}
			checkExclusive(t, clients)
			total := 0
			for _, c := range clients {
				total += c.owned.Len()
				if c.epoch != g.AssignmentEpoch() {
					t.Errorf("%s at epoch %d, assignment epoch %d", c.id, c.epoch, g.AssignmentEpoch())
				}
			}
			if total != 10 || g.State() != "Stable" {
				t.Errorf("%d partitions owned, state %s; want all 10, Stable", total, g.State())
			}
		})
	}
}

func TestJoinKeepsPartitionsThatStayPut(t *testing.T) {
	g := New("g", DefaultConfig())
	now := time.Unix(0, 0)
	a := &client{id: "a"}
	a.beat(t, g, now, HeartbeatRequest{SubscribedNames: []string{"a"}})
	if a.owned.Len() != 6 {
		t.Fatalf("single member owns %d partitions", a.owned.Len())
	}
	b := &client{id: "b"}
	b.beat(t, g, now, HeartbeatRequest{SubscribedNames: []string{"a"}})
	if b.owned.Len() != 0 {
		t.Fatalf("new member got %v before a revoked", b.owned)
	}
	before := a.owned.Clone()
	a.beat(t, g, now, HeartbeatRequest{}) // told to revoke three
	if a.owned.Len() != 3 || !subset(a.owned, before) {
		t.Fatalf("a after the join: %v", a.owned)
	}
	a.beat(t, g, now, HeartbeatRequest{}) // revocation acknowledged
	b.beat(t, g, now, HeartbeatRequest{})
	if b.owned.Len() != 3 || intersects(a.owned, b.owned) {
		t.Fatalf("after revocation a %v b %v", a.owned, b.owned)
	}
}

func TestStaticMemberRejoinsWithItsAssignment(t *testing.T) {
	g := New("g", DefaultConfig())
	now := time.Unix(0, 0)
	a := &client{id: "a1"}
	a.beat(t, g, now, HeartbeatRequest{InstanceID: "i", SubscribedNames: []string{"a"}})
	owned := a.owned.Clone()
	if _, err := g.Heartbeat(now, HeartbeatRequest{MemberID: "a2", InstanceID: "i", SubscribedNames: []string{"a"}}, topics()); !errors.Is(err, protocol.UnreleasedInstanceID) {
		t.Fatalf("second member with the instance id: %v", err)
	}
	if _, err := g.Heartbeat(now, HeartbeatRequest{MemberID: "a1", MemberEpoch: -2}, topics()); err != nil {
		t.Fatal(err)
	}
	back := &client{id: "a2"}
	back.beat(t, g, now, HeartbeatRequest{InstanceID: "i", SubscribedNames: []string{"a"}})
	if !back.owned.Equal(owned) {
		t.Fatalf("static member came back with %v, had %v", back.owned, owned)
	}
}

// A static member restarting under a new member id keeps its ranges under the range assignor,
// which orders static members by instance id: the other member is not moved.
func TestStaticMemberKeepsItsRanges(t *testing.T) {
	g := New("g", DefaultConfig())
	now := time.Unix(0, 0)
	assignor := AssignorRange
	subscribe := func(instance string) HeartbeatRequest {
		return HeartbeatRequest{InstanceID: instance, SubscribedNames: []string{"a"}, ServerAssignor: &assignor}
	}
	first, second := &client{id: "m"}, &client{id: "n"}
	for range 3 {
		first.beat(t, g, now, subscribe("i1"))
		second.beat(t, g, now, subscribe("i2"))
	}
	owned := first.owned.Clone()
	if owned.Len() != 3 {
		t.Fatalf("i1 owns %v", owned)
	}
	if _, err := g.Heartbeat(now, HeartbeatRequest{MemberID: "m", MemberEpoch: -2}, topics()); err != nil {
		t.Fatal(err)
	}
	back := &client{id: "z"} // sorts after n: ordered by member id it would take the upper range
	for range 3 {
		back.beat(t, g, now, subscribe("i1"))
		second.beat(t, g, now, subscribe("i2"))
	}
	if !back.owned.Equal(owned) {
		t.Fatalf("static member came back with %v, had %v", back.owned, owned)
	}
	checkExclusive(t, []*client{back, second})
}

func TestRegexSubscription(t *testing.T) {
	g := New("g", DefaultConfig())
	a := &client{id: "a"}
	regex := "a|b"
	a.beat(t, g, time.Unix(0, 0), HeartbeatRequest{SubscribedRegex: &regex})
	if a.owned.Len() != 10 {
		t.Fatalf("regex a|b assigned %v", a.owned)
	}
	bad := "("
	if _, err := g.Heartbeat(time.Unix(0, 0), HeartbeatRequest{MemberID: "x", SubscribedRegex: &bad}, topics()); !errors.Is(err, protocol.InvalidRegularExpression) {
		t.Fatalf("bad regex: %v", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	g := New("g", DefaultConfig())
	now := time.Unix(0, 0)
	a := &client{id: "a"}
	a.beat(t, g, now, HeartbeatRequest{SubscribedNames: []string{"a", "b"}})
	loaded, err := Load("g", DefaultConfig(), g.Record(), now)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Epoch() != g.Epoch() || len(loaded.Members()) != 1 || !loaded.Members()[0].Assigned.Equal(a.owned) {
		t.Fatalf("loaded %+v", loaded.Members())
	}
	a.beat(t, loaded, now, HeartbeatRequest{}) // the member carries on at its epoch
}
