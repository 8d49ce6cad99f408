package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// The member's life under GroupProtocolConsumer (KIP-848), run by manageConsumerProtocol:
//
//	joining (epoch 0, no owned partitions) --answer: epoch E, assignment--> stable at E
//	stable --heartbeat every interval, reporting the owned partitions--> stable
//	  answer with an assignment: partitions it lacks are revoked (OnRevoked, commit at the
//	  current epoch), then new ones started (OnAssigned); a revocation is reported by a heartbeat
//	  at once, since the broker gives the partitions to others only after that report.
//	UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, or no answer for a session: lose all -> joining
//	FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, a refusal -> failed
//
// Close revokes (and commits) everything and heartbeats epoch -1 (a static member: -2, keeping its
// place for a restart). The member id is chosen here (ConsumerGroupHeartbeat v1) and kept across
// rejoins. The member epoch takes the generation's place in memberIdentity, so OffsetCommit carries
// it, as KIP-848 requires.

// Epochs a member sends: 0 joins, -1 leaves, -2 leaves keeping a static member's place.
const (
	memberEpochJoin        = 0
	memberEpochLeave       = -1
	memberEpochLeaveStatic = -2
)

// newMemberID returns a random member id (22 URL-safe characters, as Kafka's clients choose).
func newMemberID() string {
	var id [16]byte
	rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// manageConsumerProtocol is the group's background goroutine under GroupProtocolConsumer.
func (g *GroupConsumer) manageConsumerProtocol(ctx context.Context) {
	g.mu.Lock()
	g.mu.identity.memberID, g.mu.identity.generation = newMemberID(), -1
	g.mu.protocol = g.cfg.serverAssignor
	g.mu.Unlock()
	epoch := int32(memberEpochJoin)
	interval := g.cfg.heartbeatInterval
	lastAnswered := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.wakeManager:
			g.startPending(ctx)
			continue
		case <-timer.C:
		}
		g.startPending(ctx)
		resp, err := g.consumerHeartbeat(ctx, epoch)
		if ctx.Err() != nil {
			return
		}
		next := interval
		switch {
		case err == nil:
			lastAnswered = time.Now()
			epoch = resp.MemberEpoch
			g.mu.Lock()
			g.mu.identity.generation = epoch
			g.mu.Unlock()
			if resp.HeartbeatIntervalMillis > 0 {
				interval = time.Duration(resp.HeartbeatIntervalMillis) * time.Millisecond
				next = interval
			}
			if resp.Assignment != nil && g.applyConsumerAssignment(ctx, resp.Assignment) {
				next = 0 // report the revocation at once
			}
		case errors.Is(err, protocol.UnknownMemberID), errors.Is(err, protocol.FencedMemberEpoch):
			// The group dropped this member (its session expired) or moved past its epoch.
			g.lose(ctx)
			epoch, next = memberEpochJoin, 0
			g.mu.Lock()
			g.mu.identity.generation = -1
			g.mu.Unlock()
		case retriableGroupError(err) || errors.Is(err, context.DeadlineExceeded):
			if time.Since(lastAnswered) > g.cfg.sessionTimeout && epoch > 0 {
				// Unreachable for a whole session: the coordinator has dropped us by now.
				g.lose(ctx)
				epoch = memberEpochJoin
				g.mu.Lock()
				g.mu.identity.generation = -1
				g.mu.Unlock()
			}
			next = g.cfg.retryBackoff
		default:
			g.fail(err)
			return
		}
		timer.Reset(next)
	}
}

// consumerHeartbeat sends one ConsumerGroupHeartbeat at epoch with the member's full state: its
// subscription and, except when joining, the partitions it owns.
func (g *GroupConsumer) consumerHeartbeat(ctx context.Context, epoch int32) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	g.mu.Lock()
	identity := g.mu.identity
	owned := slices.Collect(maps.Keys(g.mu.owned))
	g.mu.Unlock()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = g.group, identity.memberID, epoch
	if identity.instanceID != "" {
		req.InstanceID = kmsg.StringPtr(identity.instanceID)
	}
	req.RebalanceTimeoutMillis = int32(g.cfg.rebalanceTimeout / time.Millisecond)
	req.SubscribedTopicNames = slices.Clone(g.topics)
	if g.cfg.serverAssignor != "" {
		req.ServerAssignor = kmsg.StringPtr(g.cfg.serverAssignor)
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if epoch > 0 {
		for _, group := range groupByTopic(owned) {
			info := g.client.metadata.cached(group.topic)
			if info == nil {
				continue // only owned after its id was resolved, so still cached
			}
			topic := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			topic.TopicID, topic.Partitions = info.id, group.partitions
			req.Topics = append(req.Topics, topic)
		}
	}
	heartbeatCtx, cancel := context.WithTimeout(ctx, g.cfg.sessionTimeout)
	defer cancel()
	raw, err := g.coordinator.roundTrip(heartbeatCtx, true, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.ConsumerGroupHeartbeatResponse)
	if err := g.coordinator.groupError("consumer group heartbeat", resp.ErrorCode); err != nil {
		if message := optionalString(resp.ErrorMessage); message != "" {
			return nil, fmt.Errorf("%w: %s", err, message)
		}
		return nil, err
	}
	return resp, nil
}

// applyConsumerAssignment makes the broker's assignment the member's: owned partitions it lacks
// are revoked (and committed), new ones started. Topic ids unknown to the metadata cache are
// looked up first; partitions of topics still unknown wait for a later answer. It reports whether
// anything was revoked.
func (g *GroupConsumer) applyConsumerAssignment(ctx context.Context, assignment *kmsg.ConsumerGroupHeartbeatResponseAssignment) (revokedAny bool) {
	names := g.topicNamesByID()
	for _, t := range assignment.Topics {
		if _, ok := names[t.TopicID]; !ok {
			metadataCtx, cancel := context.WithTimeout(ctx, g.client.cfg.requestTimeout)
			g.client.metadata.fetch(metadataCtx, g.topics, false)
			cancel()
			names = g.topicNamesByID()
			break
		}
	}
	target := map[TopicPartition]bool{}
	for _, t := range assignment.Topics {
		name, ok := names[t.TopicID]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			target[TopicPartition{Topic: name, Partition: p}] = true
		}
	}
	g.mu.Lock()
	var revoked, added []TopicPartition
	for tp := range g.mu.owned {
		if !target[tp] {
			revoked = append(revoked, tp)
		}
	}
	for tp := range target {
		if !g.mu.owned[tp] {
			added = append(added, tp)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(revoked, compareTopicPartitions)
	slices.SortFunc(added, compareTopicPartitions)
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
	return len(revoked) > 0
}

// topicNamesByID maps the ids of the subscribed topics the metadata cache knows to their names.
func (g *GroupConsumer) topicNamesByID() map[[16]byte]string {
	names := make(map[[16]byte]string, len(g.topics))
	for _, topic := range g.topics {
		if info := g.client.metadata.cached(topic); info != nil && info.id != [16]byte{} {
			names[info.id] = topic
		}
	}
	return names
}

// leaveConsumerProtocol heartbeats the leaving epoch (Close): -1, or -2 for a static member.
func (g *GroupConsumer) leaveConsumerProtocol(ctx context.Context) error {
	g.mu.Lock()
	identity := g.mu.identity
	g.mu.Unlock()
	if identity.generation < 0 {
		return nil // never joined, or already dropped
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = g.group, identity.memberID, memberEpochLeave
	if identity.instanceID != "" {
		req.InstanceID, req.MemberEpoch = kmsg.StringPtr(identity.instanceID), memberEpochLeaveStatic
	}
	raw, err := g.coordinator.roundTrip(ctx, false, req)
	if err != nil {
		return fmt.Errorf("client: group %q: leave: %w", g.group, err)
	}
	code := raw.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
	if err := g.coordinator.groupError("leave group", code); err != nil &&
		!errors.Is(err, protocol.UnknownMemberID) && !errors.Is(err, protocol.FencedMemberEpoch) {
		return fmt.Errorf("client: group %q: %w", g.group, err)
	}
	return nil
}
