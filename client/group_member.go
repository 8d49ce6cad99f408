package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// The member's life, as run by manage on the group's background goroutine:
//
//	joining  --JoinGroup+SyncGroup-->  stable  --heartbeat: REBALANCE_IN_PROGRESS-->  joining
//	   |  (MEMBER_ID_REQUIRED: rejoin     |     --cooperative revocation---------->  joining
//	   |   with the id given)             |     --ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
//	   |                                  |       no heartbeat for a session: lose all -> joining
//	   +--FENCED_INSTANCE_ID, a refusal--> failed <--FENCED_INSTANCE_ID--+
//
// Close ends any state: the goroutine stops, and Close revokes, commits and leaves.
//
// Eager protocols (range) revoke every partition before each rejoin; cooperative ones
// (cooperative-sticky) keep reading through the rebalance, revoke only what the new assignment
// lacks, and rejoin at once when they revoked something, so that its new owner gets it in the
// next generation.

// consumerProtocolType is the protocol type of consumer groups.
const consumerProtocolType = "consumer"

// heartbeatExit says why the stable phase ended.
type heartbeatExit uint8

const (
	exitStopped   heartbeatExit = iota // Close, or the member failed
	exitRebalance                      // rejoin, keeping the partitions (eager revokes them first)
	exitLost                           // the coordinator no longer knows this generation
)

// manage is the group's background goroutine.
func (g *GroupConsumer) manage(ctx context.Context) {
	for ctx.Err() == nil {
		assignment, balancer, err := g.join(ctx)
		if err != nil {
			if ctx.Err() == nil {
				g.fail(err)
			}
			return
		}
		if g.apply(ctx, assignment, balancer) {
			continue // revoked partitions: rejoin at once
		}
		switch g.heartbeatLoop(ctx) {
		case exitStopped:
			return
		case exitLost:
			g.lose(ctx)
		case exitRebalance:
			if !balancer.cooperative {
				g.revoke(ctx, g.Assigned())
			}
		}
	}
}

// fail stops the member for good with err.
func (g *GroupConsumer) fail(err error) {
	err = fmt.Errorf("client: group %q: member stopped: %w", g.group, err)
	g.mu.Lock()
	if g.mu.fatal == nil {
		g.mu.fatal = err
	}
	g.mu.Unlock()
	g.stop(err)
}

// join runs JoinGroup and SyncGroup until the member has an assignment, retrying what can be
// retried. It returns an error only for a refusal (a fenced instance id, an inconsistent
// protocol, a bad session timeout...) or when ctx ends.
func (g *GroupConsumer) join(ctx context.Context) ([]TopicPartition, Balancer, error) {
	backoff := func() error { return sleepContext(ctx, g.cfg.retryBackoff) }
	for {
		if err := ctx.Err(); err != nil {
			return nil, Balancer{}, err
		}
		g.mu.Lock()
		identity := g.mu.identity
		owned := slices.Collect(maps.Keys(g.mu.owned))
		g.mu.Unlock()
		g.leaderCounts = nil

		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = g.group, identity.memberID, consumerProtocolType
		req.SessionTimeoutMillis = int32(g.cfg.sessionTimeout / time.Millisecond)
		req.RebalanceTimeoutMillis = int32(g.cfg.rebalanceTimeout / time.Millisecond)
		if identity.instanceID != "" {
			req.InstanceID = kmsg.StringPtr(identity.instanceID)
		}
		for _, b := range g.cfg.balancers {
			offered := kmsg.NewJoinGroupRequestProtocol()
			var claimed []TopicPartition
			if b.cooperative {
				claimed = owned
			}
			offered.Name, offered.Metadata = b.name, encodeSubscription(b, g.topics, claimed, identity.generation)
			req.Protocols = append(req.Protocols, offered)
		}
		joinCtx, cancel := context.WithTimeout(ctx, g.cfg.rebalanceTimeout+g.cfg.sessionTimeout)
		raw, err := g.coordinator.roundTrip(joinCtx, true, req)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, Balancer{}, ctx.Err()
			}
			if retriableGroupError(err) || errors.Is(err, context.DeadlineExceeded) {
				if err := backoff(); err != nil {
					return nil, Balancer{}, err
				}
				continue
			}
			return nil, Balancer{}, err
		}
		resp := raw.(*kmsg.JoinGroupResponse)
		switch err := g.coordinator.groupError("join group", resp.ErrorCode); {
		case err == nil:
		case errors.Is(err, protocol.MemberIDRequired):
			g.setMemberID(resp.MemberID)
			continue
		case errors.Is(err, protocol.UnknownMemberID), errors.Is(err, protocol.IllegalGeneration):
			g.lose(ctx)
			g.setMemberID("")
			continue
		case errors.Is(err, protocol.RebalanceInProgress) || retriableGroupError(err):
			if err := backoff(); err != nil {
				return nil, Balancer{}, err
			}
			continue
		default:
			return nil, Balancer{}, err
		}

		balancer, ok := g.balancer(optionalString(resp.Protocol))
		if !ok {
			return nil, Balancer{}, fmt.Errorf("client: group %q chose protocol %q, which this member did not offer", g.group, optionalString(resp.Protocol))
		}
		leader := resp.LeaderID == resp.MemberID
		g.mu.Lock()
		g.mu.identity.memberID, g.mu.identity.generation = resp.MemberID, resp.Generation
		g.mu.protocol, g.mu.leader = balancer.name, leader
		identity = g.mu.identity
		g.mu.Unlock()

		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group, sync.Generation, sync.MemberID = g.group, identity.generation, identity.memberID
		sync.ProtocolType, sync.Protocol = kmsg.StringPtr(consumerProtocolType), kmsg.StringPtr(balancer.name)
		if identity.instanceID != "" {
			sync.InstanceID = kmsg.StringPtr(identity.instanceID)
		}
		if leader && !resp.SkipAssignment {
			plan, err := g.assignAsLeader(ctx, balancer, resp.Members)
			if err != nil {
				if ctx.Err() != nil {
					return nil, Balancer{}, ctx.Err()
				}
				if err := backoff(); err != nil { // rejoin; the coordinator's rebalance timeout bounds this
					return nil, Balancer{}, err
				}
				continue
			}
			for _, memberID := range slices.Sorted(maps.Keys(plan)) {
				assignment := kmsg.NewSyncGroupRequestGroupAssignment()
				assignment.MemberID, assignment.MemberAssignment = memberID, encodeAssignment(plan[memberID])
				sync.GroupAssignment = append(sync.GroupAssignment, assignment)
			}
		}
		syncCtx, cancel := context.WithTimeout(ctx, g.cfg.rebalanceTimeout+g.cfg.sessionTimeout)
		raw, err = g.coordinator.roundTrip(syncCtx, true, sync)
		cancel()
		if err == nil {
			err = g.coordinator.groupError("sync group", raw.(*kmsg.SyncGroupResponse).ErrorCode)
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, Balancer{}, ctx.Err()
		case errors.Is(err, protocol.UnknownMemberID):
			g.lose(ctx)
			g.setMemberID("")
			continue
		case errors.Is(err, protocol.RebalanceInProgress), errors.Is(err, protocol.IllegalGeneration):
			continue // a new join phase began: join it
		case retriableGroupError(err) || errors.Is(err, context.DeadlineExceeded):
			if err := backoff(); err != nil {
				return nil, Balancer{}, err
			}
			continue
		default:
			return nil, Balancer{}, err
		}
		assignment, err := decodeAssignment(raw.(*kmsg.SyncGroupResponse).MemberAssignment)
		if err != nil {
			return nil, Balancer{}, err
		}
		return assignment, balancer, nil
	}
}

// retriableGroupError reports errors after which the same request may be sent again: network
// failures, retriable codes and the coordinator moving.
func retriableGroupError(err error) bool {
	return IsRetriable(err) || isCoordinatorError(err)
}

func (g *GroupConsumer) setMemberID(id string) {
	g.mu.Lock()
	g.mu.identity.memberID = id
	if id == "" {
		g.mu.identity.generation = -1
	}
	g.mu.Unlock()
}

func (g *GroupConsumer) balancer(name string) (Balancer, bool) {
	for _, b := range g.cfg.balancers {
		if b.name == name {
			return b, true
		}
	}
	return Balancer{}, false
}

// assignAsLeader decodes the members' subscriptions, learns the partition counts of every topic
// any member subscribes (fresh metadata) and runs the balancer. Topics that do not exist get no
// partitions.
func (g *GroupConsumer) assignAsLeader(ctx context.Context, balancer Balancer, joined []kmsg.JoinGroupResponseMember) (map[string][]TopicPartition, error) {
	members := make([]groupMember, 0, len(joined))
	topics := map[string]bool{}
	for _, j := range joined {
		m, err := decodeSubscription(j.MemberID, optionalString(j.InstanceID), j.ProtocolMetadata)
		if err != nil {
			// A member we cannot read gets nothing rather than stalling the group.
			m = groupMember{memberID: j.MemberID, instanceID: optionalString(j.InstanceID), generation: -1}
		}
		members = append(members, m)
		for _, topic := range m.topics {
			topics[topic] = true
		}
	}
	names := slices.Sorted(maps.Keys(topics))
	metadataCtx, cancel := context.WithTimeout(ctx, g.client.cfg.requestTimeout)
	defer cancel()
	if _, err := g.client.metadata.fetch(metadataCtx, names, false); err != nil {
		return nil, fmt.Errorf("client: group %q: leader metadata: %w", g.group, err)
	}
	counts := make(map[string]int32, len(names))
	for _, topic := range names {
		if info := g.client.metadata.cached(topic); info != nil {
			counts[topic] = int32(len(info.partitions))
		}
	}
	for _, topic := range names {
		g.client.metadata.use(topic) // refreshed in the background, for partitionCountsChanged
	}
	g.leaderCounts = counts
	plan := balancer.assign(members, counts)
	for _, m := range members {
		if plan[m.memberID] == nil {
			plan[m.memberID] = []TopicPartition{}
		}
	}
	return plan, nil
}

// apply makes assignment the member's: partitions it lacks are revoked (cooperative: only those;
// eager members own nothing here), new ones are started and announced (OnAssigned). It reports
// whether something was revoked, in which case a cooperative member rejoins at once.
func (g *GroupConsumer) apply(ctx context.Context, assignment []TopicPartition, balancer Balancer) (rejoin bool) {
	g.mu.Lock()
	var revoked, added []TopicPartition
	assigned := map[TopicPartition]bool{}
	for _, tp := range assignment {
		assigned[tp] = true
		if !g.mu.owned[tp] {
			added = append(added, tp)
		}
	}
	for tp := range g.mu.owned {
		if !assigned[tp] {
			revoked = append(revoked, tp)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(revoked, compareTopicPartitions)
	if len(revoked) > 0 {
		g.revoke(ctx, revoked)
	}
	if len(added) > 0 {
		g.mu.Lock()
		for _, tp := range added {
			g.mu.owned[tp] = true
			g.mu.starting[tp] = startFromCommitted
			delete(g.mu.marks, tp)
			delete(g.mu.committed, tp)
		}
		g.mu.Unlock()
		g.startPending(ctx)
		if g.cfg.onAssigned != nil {
			g.cfg.onAssigned(ctx, added)
		}
	}
	return len(revoked) > 0 && balancer.cooperative
}

// startPending resolves the start offsets of owned partitions not yet read and assigns them to
// the consumer. Failures leave them pending; the heartbeat loop retries.
func (g *GroupConsumer) startPending(ctx context.Context) {
	g.mu.Lock()
	pending := maps.Clone(g.mu.starting)
	g.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, g.client.cfg.requestTimeout)
	defer cancel()
	var fromCommitted []TopicPartition
	for tp, kind := range pending {
		if kind == startFromCommitted {
			fromCommitted = append(fromCommitted, tp)
		}
	}
	var committed map[TopicPartition]int64
	if len(fromCommitted) > 0 {
		var err error
		if committed, err = g.coordinator.fetchOffsets(ctx, fromCommitted); err != nil {
			return
		}
	}
	assignments := make([]Assignment, 0, len(pending))
	for tp := range pending {
		at := g.cfg.resetOffset
		if offset, ok := committed[tp]; ok && offset >= 0 {
			at = AtOffset(offset)
		}
		assignments = append(assignments, Assignment{Topic: tp.Topic, Partition: tp.Partition, Offset: at})
	}
	if err := g.consumer.Assign(ctx, assignments...); err != nil {
		return
	}
	g.mu.Lock()
	for tp, kind := range pending {
		if g.mu.starting[tp] == kind { // not marked for a reset again meanwhile
			delete(g.mu.starting, tp)
		}
		if offset, ok := committed[tp]; ok && offset >= 0 {
			g.mu.committed[tp] = offset
		}
	}
	g.mu.Unlock()
}

// revoke takes partitions away: Poll stops returning their records (their positions are read in
// the same step), OnRevoked runs, and then, with commit on revoke, their positions (or marks) are
// committed. It returns the commit's error.
func (g *GroupConsumer) revoke(ctx context.Context, partitions []TopicPartition) error {
	if len(partitions) == 0 {
		return nil
	}
	positions := g.consumer.unassignWithPositions(partitions)
	if g.cfg.onRevoked != nil {
		g.cfg.onRevoked(ctx, partitions)
	}
	var err error
	if g.cfg.commitOnRevoke {
		if g.cfg.autoCommitMarks {
			err = g.commitSource(ctx, partitions, true)
		} else {
			offsets := map[TopicPartition]int64{}
			g.mu.Lock()
			for tp, position := range positions {
				if committed, known := g.mu.committed[tp]; !known || committed != position {
					offsets[tp] = position
				}
			}
			g.mu.Unlock()
			if len(offsets) > 0 {
				err = g.CommitOffsets(ctx, offsets)
			}
		}
	}
	g.forget(partitions)
	return err
}

// lose drops every partition without committing: the group has moved on without this member.
func (g *GroupConsumer) lose(ctx context.Context) {
	partitions := g.Assigned()
	if len(partitions) == 0 {
		return
	}
	g.consumer.Unassign(partitions...)
	if callback := g.cfg.onLost; callback != nil {
		callback(ctx, partitions)
	} else if g.cfg.onRevoked != nil {
		g.cfg.onRevoked(ctx, partitions)
	}
	g.forget(partitions)
}

// forget removes partitions from the member's state.
func (g *GroupConsumer) forget(partitions []TopicPartition) {
	g.mu.Lock()
	for _, tp := range partitions {
		delete(g.mu.owned, tp)
		delete(g.mu.starting, tp)
		delete(g.mu.marks, tp)
		delete(g.mu.committed, tp)
	}
	g.mu.Unlock()
}

// heartbeatLoop heartbeats every interval while the group is stable, and retries pending starts
// and offset resets when woken.
func (g *GroupConsumer) heartbeatLoop(ctx context.Context) heartbeatExit {
	ticker := time.NewTicker(g.cfg.heartbeatInterval)
	defer ticker.Stop()
	lastAnswered := time.Now()
	for {
		select {
		case <-ctx.Done():
			return exitStopped
		case <-g.wakeManager:
			g.startPending(ctx)
			continue
		case <-ticker.C:
		}
		g.startPending(ctx)
		if g.partitionCountsChanged() {
			return exitRebalance
		}
		g.mu.Lock()
		identity := g.mu.identity
		g.mu.Unlock()
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = g.group, identity.generation, identity.memberID
		if identity.instanceID != "" {
			req.InstanceID = kmsg.StringPtr(identity.instanceID)
		}
		heartbeatCtx, cancel := context.WithTimeout(ctx, g.cfg.sessionTimeout)
		raw, err := g.coordinator.roundTrip(heartbeatCtx, true, req)
		cancel()
		if err == nil {
			err = g.coordinator.groupError("heartbeat", raw.(*kmsg.HeartbeatResponse).ErrorCode)
		}
		switch {
		case ctx.Err() != nil:
			return exitStopped
		case err == nil:
			lastAnswered = time.Now()
		case errors.Is(err, protocol.RebalanceInProgress):
			return exitRebalance
		case errors.Is(err, protocol.IllegalGeneration):
			return exitLost
		case errors.Is(err, protocol.UnknownMemberID):
			g.setMemberID("")
			return exitLost
		case errors.Is(err, protocol.FencedInstanceID):
			g.fail(err)
			return exitStopped
		case time.Since(lastAnswered) > g.cfg.sessionTimeout:
			// Unreachable for a whole session: the coordinator has dropped us by now.
			return exitLost
		}
	}
}

// partitionCountsChanged reports, for a leader, whether metadata shows partition counts other
// than those its assignment used (partitions added, a subscribed topic created or deleted).
func (g *GroupConsumer) partitionCountsChanged() bool {
	for topic, count := range g.leaderCounts {
		current := int32(0)
		if info := g.client.metadata.cached(topic); info != nil {
			current = int32(len(info.partitions))
		}
		if current != count {
			return true
		}
	}
	return false
}

// autoCommit commits every interval until ctx ends. Errors are left for the next round: a commit
// refused during a rebalance is made again after it.
func (g *GroupConsumer) autoCommit(ctx context.Context) {
	ticker := time.NewTicker(g.cfg.autoCommitInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		commitCtx, cancel := context.WithTimeout(ctx, g.client.cfg.requestTimeout)
		g.commitSource(commitCtx, nil, g.cfg.autoCommitMarks)
		cancel()
	}
}

// leave sends LeaveGroup for this member (Close, dynamic members).
func (g *GroupConsumer) leave(ctx context.Context) error {
	g.mu.Lock()
	identity := g.mu.identity
	g.mu.Unlock()
	if identity.memberID == "" {
		return nil
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = g.group, identity.memberID // v0-2
	member := kmsg.NewLeaveGroupRequestMember()
	member.MemberID = identity.memberID
	member.Reason = kmsg.StringPtr("the consumer is closing")
	req.Members = append(req.Members, member) // v3+
	raw, err := g.coordinator.roundTrip(ctx, false, req)
	if err != nil {
		return fmt.Errorf("client: group %q: leave: %w", g.group, err)
	}
	resp := raw.(*kmsg.LeaveGroupResponse)
	code := resp.ErrorCode
	for _, m := range resp.Members {
		if code == 0 {
			code = m.ErrorCode
		}
	}
	if err := g.coordinator.groupError("leave group", code); err != nil && !errors.Is(err, protocol.UnknownMemberID) {
		return fmt.Errorf("client: group %q: %w", g.group, err)
	}
	return nil
}

func optionalString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
