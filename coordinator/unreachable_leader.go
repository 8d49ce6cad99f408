package coordinator

// Leaders that their followers cannot reach. A leader whose replication links are cut while its
// link to the controller still works keeps its session, so fencing never moves its partitions; its
// ISR then shrinks to itself and acks=all with min.insync.replicas > 1 stops until the links heal.
// Followers therefore report a leader they have not heard from for a while, and the controller
// moves leadership of each partition whose every other in-sync member reports that leader to one
// of them, dropping the old leader from the ISR. This is a clean election: every ISR member has
// every record below the high watermark, and the old leader, no longer in the ISR, truncates its
// unreplicated tail when it follows again.

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// unreachableReportTTL is how long a follower's report counts; followers repeat theirs while the
// leader stays silent.
const unreachableReportTTL = 2 * time.Second

// UnreachableReport is a follower's word that it has not heard from a leader.
type UnreachableReport struct {
	Follower int32 `json:"follower"`
	Leader   int32 `json:"leader"`
}

// ReportUnreachableLeader tells the controller that follower has had no answer from leader for a
// while (replication.Config.LeaderUnreachableAfter).
func (c *Coordinator) ReportUnreachableLeader(ctx context.Context, follower, leader int32) error {
	_, err := callController(c, ctx, opReportUnreachable, UnreachableReport{Follower: follower, Leader: leader}, c.unreachableLeaderReported)
	return err
}

// unreachableLeaderReported runs on the controller: it records the report and demotes the leader
// where every other in-sync member has reported it recently.
func (c *Coordinator) unreachableLeaderReported(ctx context.Context, report UnreachableReport) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	now := time.Now()
	c.liveness.mu.Lock()
	if c.liveness.unreachable == nil {
		c.liveness.unreachable = map[UnreachableReport]time.Time{}
	}
	c.liveness.unreachable[report] = now
	var reporters []int32
	for r, at := range c.liveness.unreachable {
		switch {
		case now.Sub(at) > unreachableReportTTL:
			delete(c.liveness.unreachable, r)
		case r.Leader == report.Leader:
			reporters = append(reporters, r.Follower)
		}
	}
	c.liveness.mu.Unlock()
	slices.Sort(reporters)
	cmd := &demoteUnreachableCommand{Leader: report.Leader, Reporters: reporters}
	if next, _ := cmd.apply(c.Metadata()); next == nil {
		return struct{}{}, nil // nothing would move
	}
	c.logger.Warn("coordinator: moving leadership off a broker its followers cannot reach", "node", report.Leader, "reported_by", reporters)
	if _, err := c.propose(ctx, cmd); err != nil {
		return struct{}{}, fmt.Errorf("coordinator: demote unreachable leader %d: %w", report.Leader, err)
	}
	c.metrics.unreachableDemotions.Inc()
	return struct{}{}, nil
}

// demoteUnreachableCommand moves leadership off Leader for every partition whose other in-sync
// members all appear in Reporters (and are live), to the first of them in replica order; Leader
// leaves those ISRs.
type demoteUnreachableCommand struct {
	Leader    int32   `json:"leader"`
	Reporters []int32 `json:"reporters"`
}

func (*demoteUnreachableCommand) kind() commandType { return commandDemoteUnreachable }

func (c *demoteUnreachableCommand) apply(state *Metadata) (*Metadata, applyResult) {
	live := liveIn(state)
	moved := mapPartitions(state, func(_ *Topic, p Partition) (Partition, bool) {
		return demotePartition(p, c.Leader, c.Reporters, live)
	})
	if moved == nil {
		return nil, applyResult{}
	}
	return moved, applyResult{}
}

// demotePartition is p after its leader was reported unreachable by reporters: unchanged unless
// leader leads it and every other ISR member (at least one) reported it and is live; then the
// leader resigns it (resignPartition).
func demotePartition(p Partition, leader int32, reporters []int32, live func(int32) bool) (Partition, bool) {
	if p.Leader != leader {
		return p, false
	}
	others := withoutMember(p.ISR, leader)
	if len(others) == 0 || slices.Contains(others, leader) {
		return p, false
	}
	for _, id := range others {
		if !slices.Contains(reporters, id) || !live(id) {
			return p, false
		}
	}
	next, err := resignPartition(p, leader, live)
	if err != nil {
		return p, false
	}
	return next, true
}
