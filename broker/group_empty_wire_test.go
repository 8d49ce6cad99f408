package broker

// A group whose last member leaves stays Empty (group.Config.EmptyRetention), as in Kafka: described,
// listed and deletable, until it expires.

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// joinAndLeave makes one member join group id (v9, with the MEMBER_ID_REQUIRED round), sync, and
// leave, without committing offsets.
func joinAndLeave(t *testing.T, c *testConn, id string) {
	t.Helper()
	join := joinRequest(9, id, "")
	join.MemberID = roundTrip[*kmsg.JoinGroupResponse](c, join).MemberID
	joined := roundTrip[*kmsg.JoinGroupResponse](c, join)
	wantCode(t, "join", joined.ErrorCode, protocol.None)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(5)
	sync.Group, sync.MemberID, sync.Generation = id, joined.MemberID, joined.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: joined.MemberID, MemberAssignment: []byte("all")}}
	wantCode(t, "sync", roundTrip[*kmsg.SyncGroupResponse](c, sync).ErrorCode, protocol.None)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(5)
	leave.Group = id
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: joined.MemberID}}
	wantCode(t, "leave", roundTrip[*kmsg.LeaveGroupResponse](c, leave).ErrorCode, protocol.None)
}

func describeGroup(c *testConn, id string) kmsg.DescribeGroupsResponseGroup {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.SetVersion(5)
	req.Groups = []string{id}
	return roundTrip[*kmsg.DescribeGroupsResponse](c, req).Groups[0]
}

func listedGroups(c *testConn) map[string]string {
	req := kmsg.NewPtrListGroupsRequest()
	req.SetVersion(4)
	states := map[string]string{}
	for _, g := range roundTrip[*kmsg.ListGroupsResponse](c, req).Groups {
		states[g.Group] = g.GroupState
	}
	return states
}

func deleteGroup(c *testConn, id string) int16 {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.SetVersion(2)
	req.Groups = []string{id}
	return roundTrip[*kmsg.DeleteGroupsResponse](c, req).Groups[0].ErrorCode
}

func TestEmptiedGroupStaysEmptyUntilDeleted(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	joinAndLeave(t, c, "emptied")

	if g := describeGroup(c, "emptied"); g.ErrorCode != 0 || g.State != "Empty" || g.ProtocolType != "consumer" || len(g.Members) != 0 {
		t.Fatalf("DescribeGroups after the last member left: %+v; want Empty, consumer, no members", g)
	}
	if state := listedGroups(c)["emptied"]; state != "Empty" {
		t.Fatalf("ListGroups state %q, want Empty", state)
	}
	wantCode(t, "delete emptied group", deleteGroup(c, "emptied"), protocol.None)
	if g := describeGroup(c, "emptied"); g.State != "Dead" {
		t.Fatalf("DescribeGroups after delete: state %q", g.State)
	}
	if _, listed := listedGroups(c)["emptied"]; listed {
		t.Fatal("deleted group still listed")
	}
	wantCode(t, "delete again", deleteGroup(c, "emptied"), protocol.GroupIDNotFound)

	// The group can be used again after its deletion.
	joinAndLeave(t, c, "emptied")
	if g := describeGroup(c, "emptied"); g.State != "Empty" {
		t.Fatalf("reused group: state %q", g.State)
	}
}

func TestEmptiedGroupExpiresAfterRetention(t *testing.T) {
	b := startBroker(t, func(cfg *Config) { cfg.Groups.EmptyRetention = 300 * time.Millisecond })
	c := dial(t, b)
	// The broker starts the retention when it handles the leave, somewhere between these two
	// readings: the group must live at least the retention past the first.
	joining := time.Now()
	joinAndLeave(t, c, "short-lived")
	left := time.Now()
	if g := describeGroup(c, "short-lived"); g.State != "Empty" && time.Since(left) < 300*time.Millisecond {
		t.Fatalf("state %q right after the last member left", g.State)
	}
	await(t, "the emptied group to expire", func() bool { return describeGroup(c, "short-lived").State == "Dead" })
	if elapsed := time.Since(joining); elapsed < 300*time.Millisecond {
		t.Fatalf("expired %v after the join, before its retention", elapsed)
	}
	if _, listed := listedGroups(c)["short-lived"]; listed {
		t.Fatal("expired group still listed")
	}
	wantCode(t, "delete expired group", deleteGroup(c, "short-lived"), protocol.GroupIDNotFound)
}
