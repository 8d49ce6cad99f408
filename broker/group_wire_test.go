package broker

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func joinRequest(version int16, groupID, memberID string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(version)
	req.Group, req.MemberID, req.ProtocolType = groupID, memberID, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 10_000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte("subscription")
	req.Protocols = append(req.Protocols, p)
	return req
}

func wantCode(t *testing.T, what string, got int16, want protocol.ErrorCode) {
	t.Helper()
	if got != want.Code {
		t.Fatalf("%s: error %d, want %d %s", what, got, want.Code, want.Name)
	}
}

// TestGroupProtocolOverTheWire walks one member through the group APIs with raw requests: the v4
// MEMBER_ID_REQUIRED rejoin, sync, heartbeat, commits and fetches at old and new versions, describe,
// list, leave and delete, plus FindCoordinator and __consumer_offsets.
func TestGroupProtocolOverTheWire(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("orders", 2, nil)

	for _, version := range []int16{0, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(version)
		req.CoordinatorKey = "g"
		resp := roundTrip[*kmsg.FindCoordinatorResponse](c, req)
		if resp.ErrorCode != 0 || resp.NodeID != b.config.NodeID || resp.Port != b.advertised.port || resp.Host != b.advertised.host {
			t.Fatalf("FindCoordinator v%d: %+v", version, resp)
		}
	}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.SetVersion(4)
	find.CoordinatorType = 1
	find.CoordinatorKeys = []string{"txn-a", "txn-b"}
	if resp := roundTrip[*kmsg.FindCoordinatorResponse](c, find); len(resp.Coordinators) != 2 || resp.Coordinators[1].ErrorCode != 0 || resp.Coordinators[1].Key != "txn-b" {
		t.Fatalf("FindCoordinator v4: %+v", resp)
	}
	find.CoordinatorType = 7
	wantCode(t, "key type 7", roundTrip[*kmsg.FindCoordinatorResponse](c, find).Coordinators[0].ErrorCode, protocol.InvalidRequest)

	// JoinGroup v4+: first a member id, then the join.
	join := joinRequest(9, "g", "")
	first := roundTrip[*kmsg.JoinGroupResponse](c, join)
	wantCode(t, "join without member id", first.ErrorCode, protocol.MemberIDRequired)
	if !strings.HasPrefix(first.MemberID, "sluice-test-") {
		t.Fatalf("member id %q does not start with the client id", first.MemberID)
	}
	join.MemberID = first.MemberID
	joined := roundTrip[*kmsg.JoinGroupResponse](c, join)
	if joined.ErrorCode != 0 || joined.Generation != 1 || joined.LeaderID != first.MemberID || len(joined.Members) != 1 ||
		deref(joined.Protocol) != "range" || deref(joined.ProtocolType) != "consumer" {
		t.Fatalf("join: %+v", joined)
	}
	wantCode(t, "unknown member", roundTrip[*kmsg.JoinGroupResponse](c, joinRequest(9, "g", "nobody")).ErrorCode, protocol.UnknownMemberID)
	short := joinRequest(5, "g", "")
	short.SessionTimeoutMillis = 100
	wantCode(t, "short session", roundTrip[*kmsg.JoinGroupResponse](c, short).ErrorCode, protocol.InvalidSessionTimeout)
	other := joinRequest(9, "g", joined.MemberID)
	other.ProtocolType = "connect"
	wantCode(t, "protocol type", roundTrip[*kmsg.JoinGroupResponse](c, other).ErrorCode, protocol.InconsistentGroupProtocol)

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(5)
	sync.Group, sync.MemberID, sync.Generation = "g", joined.MemberID, 1
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	assignment := kmsg.NewSyncGroupRequestGroupAssignment()
	assignment.MemberID, assignment.MemberAssignment = joined.MemberID, []byte("all of it")
	sync.GroupAssignment = append(sync.GroupAssignment, assignment)
	synced := roundTrip[*kmsg.SyncGroupResponse](c, sync)
	if synced.ErrorCode != 0 || string(synced.MemberAssignment) != "all of it" {
		t.Fatalf("sync: %+v", synced)
	}

	heartbeat := func(generation int32, memberID string) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.SetVersion(4)
		req.Group, req.MemberID, req.Generation = "g", memberID, generation
		return roundTrip[*kmsg.HeartbeatResponse](c, req).ErrorCode
	}
	wantCode(t, "heartbeat", heartbeat(1, joined.MemberID), protocol.None)
	wantCode(t, "stale heartbeat", heartbeat(0, joined.MemberID), protocol.IllegalGeneration)
	wantCode(t, "stranger heartbeat", heartbeat(1, "x"), protocol.UnknownMemberID)

	commit := func(version int16, groupID, memberID string, generation int32, offset int64) []int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(version)
		req.Group, req.MemberID, req.Generation = groupID, memberID, generation
		topic := kmsg.NewOffsetCommitRequestTopic()
		topic.Topic = "orders"
		for partition := range int32(3) {
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = partition, offset+int64(partition), 0, kmsg.StringPtr("meta")
			topic.Partitions = append(topic.Partitions, p)
		}
		req.Topics = append(req.Topics, topic)
		var codes []int16
		for _, p := range roundTrip[*kmsg.OffsetCommitResponse](c, req).Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		return codes
	}
	if codes := commit(8, "g", joined.MemberID, 1, 100); codes[0] != 0 || codes[1] != 0 || codes[2] != protocol.UnknownTopicOrPartition.Code {
		t.Fatalf("commit: %v", codes)
	}
	wantCode(t, "stale commit", commit(8, "g", joined.MemberID, 0, 1)[0], protocol.IllegalGeneration)
	wantCode(t, "simple commit to an active group", commit(8, "g", "", -1, 1)[0], protocol.UnknownMemberID)
	wantCode(t, "simple commit", commit(2, "simple", "", -1, 7)[0], protocol.None)
	wantCode(t, "v0 commit", commit(0, "v0", "", 0, 9)[0], protocol.None)
	wantCode(t, "generation of an unknown group", commit(8, "nogroup", "m", 3, 1)[0], protocol.IllegalGeneration)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(8)
	for _, id := range []string{"g", "simple"} {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = id // all topics
		fetch.Groups = append(fetch.Groups, g)
	}
	fetch.RequireStable = true
	fetched := roundTrip[*kmsg.OffsetFetchResponse](c, fetch)
	if len(fetched.Groups) != 2 || fetched.Groups[0].Topics[0].Partitions[1].Offset != 101 ||
		fetched.Groups[0].Topics[0].Partitions[1].LeaderEpoch != 0 || deref(fetched.Groups[0].Topics[0].Partitions[1].Metadata) != "meta" ||
		fetched.Groups[1].Topics[0].Partitions[0].Offset != 7 || fetched.Groups[1].Topics[0].Partitions[0].LeaderEpoch != -1 {
		t.Fatalf("OffsetFetch v8: %+v", fetched)
	}
	old := kmsg.NewPtrOffsetFetchRequest()
	old.SetVersion(1)
	old.Group = "g"
	topic := kmsg.NewOffsetFetchRequestTopic()
	topic.Topic, topic.Partitions = "orders", []int32{0, 1, 5}
	old.Topics = append(old.Topics, topic)
	if got := roundTrip[*kmsg.OffsetFetchResponse](c, old).Topics[0].Partitions; got[0].Offset != 100 || got[2].Offset != -1 {
		t.Fatalf("OffsetFetch v1: %+v", got)
	}

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(5)
	describe.Groups = []string{"g", "simple", "unknown"}
	described := roundTrip[*kmsg.DescribeGroupsResponse](c, describe).Groups
	if described[0].State != "Stable" || len(described[0].Members) != 1 || string(described[0].Members[0].MemberAssignment) != "all of it" ||
		described[1].State != "Empty" || described[2].State != "Dead" {
		t.Fatalf("DescribeGroups: %+v", described)
	}
	list := kmsg.NewPtrListGroupsRequest()
	list.SetVersion(4)
	list.StatesFilter = []string{"stable"}
	if groups := roundTrip[*kmsg.ListGroupsResponse](c, list).Groups; len(groups) != 1 || groups[0].Group != "g" || groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups stable: %+v", groups)
	}
	list.StatesFilter = nil
	if groups := roundTrip[*kmsg.ListGroupsResponse](c, list).Groups; len(groups) != 3 {
		t.Fatalf("ListGroups: %+v", groups)
	}

	var metrics bytes.Buffer
	b.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), `sluice_group_lag_records{group="g",topic="orders",partition="0"} 0`) {
		t.Fatalf("no lag metric:\n%s", metrics.String())
	}

	deleteGroups := func(ids ...string) []int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.SetVersion(2)
		req.Groups = ids
		var codes []int16
		for _, g := range roundTrip[*kmsg.DeleteGroupsResponse](c, req).Groups {
			codes = append(codes, g.ErrorCode)
		}
		return codes
	}
	codes := deleteGroups("g", "simple", "never")
	wantCode(t, "delete active group", codes[0], protocol.NonEmptyGroup)
	wantCode(t, "delete offsets-only group", codes[1], protocol.None)
	wantCode(t, "delete unknown group", codes[2], protocol.GroupIDNotFound)

	offsetDelete := kmsg.NewPtrOffsetDeleteRequest()
	offsetDelete.Group = "g"
	dt := kmsg.NewOffsetDeleteRequestTopic()
	dt.Topic = "orders"
	dt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
	offsetDelete.Topics = append(offsetDelete.Topics, dt)
	// The member's metadata is not a consumer subscription, so nothing counts as subscribed.
	if resp := roundTrip[*kmsg.OffsetDeleteResponse](c, offsetDelete); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %+v", resp)
	}
	if _, ok := b.coordinator.Offsets().Lookup("g", "orders", 0); ok {
		t.Fatal("OffsetDelete left the offset")
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(5)
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: joined.MemberID}, {MemberID: "ghost"}}
	left := roundTrip[*kmsg.LeaveGroupResponse](c, leave)
	if left.ErrorCode != 0 || left.Members[0].ErrorCode != 0 || left.Members[1].ErrorCode != protocol.UnknownMemberID.Code {
		t.Fatalf("LeaveGroup: %+v", left)
	}
	wantCode(t, "delete emptied group", deleteGroups("g")[0], protocol.None)
	if b.coordinator.Offsets().Group("g") != nil {
		t.Fatal("DeleteGroups left offsets")
	}

	// JoinGroup v0 assigns a member id at once; the join completes after the initial delay.
	began := time.Now()
	if resp := roundTrip[*kmsg.JoinGroupResponse](c, joinRequest(0, "old", "")); resp.ErrorCode != 0 || resp.Generation != 1 || resp.MemberID == "" {
		t.Fatalf("JoinGroup v0: %+v", resp)
	}
	t.Logf("JoinGroup of a new group answered after %v", time.Since(began).Round(time.Millisecond))

	// __consumer_offsets: listed as internal, not writable.
	meta := roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, true))
	found := false
	for _, topic := range meta.Topics {
		if deref(topic.Topic) == "__consumer_offsets" {
			found = topic.IsInternal && len(topic.Partitions) == 1
		}
	}
	if !found {
		t.Fatalf("__consumer_offsets not listed as internal: %+v", meta.Topics)
	}
	wantCode(t, "produce to __consumer_offsets", c.produce("__consumer_offsets", 0, recordBatch(time.Now(), "x")).ErrorCode, protocol.InvalidTopicException)
}

// TestLeaderThatNeverSyncsIsRemovedAfterRebalanceTimeout: two members join with a short rebalance
// timeout and a session timeout longer than the test's connections live, so only the wait for the
// leader's SyncGroup can end. The leader never syncs: the follower's parked SyncGroup is answered
// REBALANCE_IN_PROGRESS once the rebalance timeout has passed, the leader is no longer a member, and
// the follower rejoins as leader of the next generation.
func TestLeaderThatNeverSyncsIsRemovedAfterRebalanceTimeout(t *testing.T) {
	const rebalanceTimeout = time.Second
	b := startBroker(t, nil)
	began := time.Now()
	conns := []*testConn{dial(t, b), dial(t, b)}
	join := func(memberID string) *kmsg.JoinGroupRequest {
		req := joinRequest(3, "lazy-leader", memberID) // v3: a member id at once
		req.SessionTimeoutMillis = 60_000
		req.RebalanceTimeoutMillis = int32(rebalanceTimeout.Milliseconds())
		return req
	}
	// Both join within the group's initial delay, so they share generation 1.
	requests := []*kmsg.JoinGroupRequest{join(""), join("")}
	correlations := []int32{conns[0].send(requests[0]), conns[1].send(requests[1])}
	var leader, follower int
	var joined [2]*kmsg.JoinGroupResponse
	for i, c := range conns {
		joined[i] = c.receive(requests[i], correlations[i]).(*kmsg.JoinGroupResponse)
		if joined[i].ErrorCode != 0 || joined[i].Generation != 1 {
			t.Fatalf("join %d: %+v", i, joined[i])
		}
		if joined[i].LeaderID == joined[i].MemberID {
			leader = i
		} else {
			follower = i
		}
	}
	if leader == follower || len(joined[leader].Members) != 2 || joined[follower].LeaderID != joined[leader].MemberID {
		t.Fatalf("no single leader of both: %+v, %+v", joined[0], joined[1])
	}

	// The follower syncs and waits; the leader stays silent.
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.SetVersion(3)
	sync.Group, sync.MemberID, sync.Generation = "lazy-leader", joined[follower].MemberID, 1
	resp := roundTrip[*kmsg.SyncGroupResponse](conns[follower], sync)
	waited := time.Since(began)
	wantCode(t, "parked sync after the leader's rebalance timeout", resp.ErrorCode, protocol.RebalanceInProgress)
	if waited < rebalanceTimeout {
		t.Fatalf("parked sync answered after %v, before the rebalance timeout %v", waited, rebalanceTimeout)
	}
	t.Logf("parked sync answered %v after the joins were sent", waited.Round(time.Millisecond))

	heartbeat := kmsg.NewPtrHeartbeatRequest()
	heartbeat.SetVersion(3)
	heartbeat.Group, heartbeat.MemberID, heartbeat.Generation = "lazy-leader", joined[leader].MemberID, 1
	wantCode(t, "heartbeat of the removed leader", roundTrip[*kmsg.HeartbeatResponse](conns[leader], heartbeat).ErrorCode, protocol.UnknownMemberID)

	rejoined := roundTrip[*kmsg.JoinGroupResponse](conns[follower], join(joined[follower].MemberID))
	if rejoined.ErrorCode != 0 || rejoined.Generation != 2 || rejoined.LeaderID != joined[follower].MemberID || len(rejoined.Members) != 1 {
		t.Fatalf("rejoin: %+v", rejoined)
	}
	sync.Generation = 2
	assignment := kmsg.NewSyncGroupRequestGroupAssignment()
	assignment.MemberID, assignment.MemberAssignment = joined[follower].MemberID, []byte("everything")
	sync.GroupAssignment = append(sync.GroupAssignment, assignment)
	if resp := roundTrip[*kmsg.SyncGroupResponse](conns[follower], sync); resp.ErrorCode != 0 || string(resp.MemberAssignment) != "everything" {
		t.Fatalf("sync as the new leader: %+v", resp)
	}
}
