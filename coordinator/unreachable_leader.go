package coordinator

// Leaders that their followers cannot reach. A leader whose replication links are cut while its
// link to the controller still works keeps its session, so fencing never moves its partitions; its
// ISR then shrinks to itself and acks=all with min.insync.replicas > 1 stops until the links heal.
// Followers therefore report a leader they have not heard from for a while, and the controller
// moves leadership of each partition whose every other in-sync member reports that leader to one
// of them, dropping the old leader from the ISR. This is a clean election: every ISR member has
// every record below the high watermark, and the old leader, no longer in the ISR, truncates its
// unreplicated tail when it follows again.
//
// A cut link is silent both ways, so both of its ends report at about the same moment, and the
// controller must tell which end is cut off before it moves anything:
//   - a report counts only while it is credible: its follower is reported by fewer followers than
//     its leader (a node whose replication links are cut reports every leader it follows, and is
//     reported by every follower of what it leads);
//   - it moves leaderships only once settled (repeated, unreachableSettle), so that the reports
//     about its follower, made within moments of it, have arrived. Unless the leader has stopped
//     heartbeating as well (heartbeatsMissed): then it is stopped, dead or cut off from the
//     controller too, and sends no reports that could weigh against it; waiting would only add
//     the settle to the time without acks (a paused controller that led partitions: 400 ms of
//     3.6 s in a chaos run);
//   - meanwhile the controller refuses the reported leader an ISR shrink that drops the reporters
//     while their reports would move its leadership: a cut-off leader drops its followers after
//     the lag time, and once alone in its ISR nobody may take over from it.
// Seen in chaos runs: without the weighing, a node whose replication links were cut was made
// leader of its only fellow ISR member's partitions, which then nobody could follow (11 s without
// acks); with the settling but without the refusal, cut-off leaders shrank their ISRs first (up to
// 15 s).

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// unreachableReportTTL is how long a follower's report counts; followers repeat theirs while the
// leader stays silent (every 200 ms).
const unreachableReportTTL = 2 * time.Second

// unreachableSettle is how long a follower must have been reporting a leader before its report
// moves anything: until its second repeat. The two ends of a cut link report within moments of
// each other when traffic flows, and up to a fetch wait (500 ms) apart on an idle link.
const unreachableSettle = 400 * time.Millisecond

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
// where every other in-sync member has credibly reported it, and the reports have settled.
func (c *Coordinator) unreachableLeaderReported(ctx context.Context, report UnreachableReport) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	now := time.Now()
	c.liveness.mu.Lock()
	if c.liveness.unreachable == nil {
		c.liveness.unreachable = unreachableReports{}
	}
	c.liveness.unreachable.add(report, now)
	settle := unreachableSettle
	if c.heartbeatsMissed(report.Leader, now) {
		settle = 0
	}
	reporters := c.liveness.unreachable.reporters(report.Leader, now, settle)
	c.liveness.mu.Unlock()
	if len(reporters) == 0 {
		return struct{}{}, nil
	}
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

// heartbeatsMissed reports whether the controller has missed two heartbeats in a row from node: it
// has not heard from it for twice the heartbeat interval, or node is the controller this one took
// over from and has not heartbeated since (it had been silent to Raft for an election's length
// before that). Never true of the controller itself, nor while this node is not the controller.
// Called with c.liveness.mu held.
func (c *Coordinator) heartbeatsMissed(node int32, now time.Time) bool {
	l := &c.liveness
	if l.lastSeen == nil || node == c.config.NodeID {
		return false
	}
	seen, ok := l.lastSeen[node]
	if !ok {
		seen = l.takeover
	}
	if node == l.deposed && !seen.After(l.takeover) {
		return true
	}
	return now.Sub(seen) > 2*c.config.BrokerHeartbeatInterval
}

// checkShrinkNotPreempted refuses (ErrInvalidISR) a leader's ISR proposal for p that drops members
// while the leader's credible reporters, settled or not, would have p's leadership moved to them.
// Runs on the controller.
func (c *Coordinator) checkShrinkNotPreempted(p Partition, leader int32, proposed []int32) error {
	if !slices.ContainsFunc(p.ISR, func(id int32) bool { return !slices.Contains(proposed, id) }) {
		return nil // drops nobody
	}
	c.liveness.mu.Lock()
	reporters := c.liveness.unreachable.reporters(leader, time.Now(), 0)
	c.liveness.mu.Unlock()
	if len(reporters) == 0 {
		return nil
	}
	if _, moves := demotePartition(p, leader, reporters, liveIn(c.Metadata())); moves {
		return fmt.Errorf("%w: the members it drops report leader %d unreachable, and leadership moves to them", ErrInvalidISR, leader)
	}
	return nil
}

// unreachableReports holds the followers' recent reports: when each was first made (in its
// current run of repeats) and last repeated.
type unreachableReports map[UnreachableReport]struct{ first, last time.Time }

// add records report at now and forgets reports older than unreachableReportTTL.
func (r unreachableReports) add(report UnreachableReport, now time.Time) {
	r.expire(now)
	at, ok := r[report]
	if !ok {
		at.first = now
	}
	at.last = now
	r[report] = at
}

func (r unreachableReports) expire(now time.Time) {
	for key, at := range r {
		if now.Sub(at.last) > unreachableReportTTL {
			delete(r, key)
		}
	}
}

// reporters returns, sorted, the followers whose reports of leader are current at now, made at
// least settle ago, and credible.
func (r unreachableReports) reporters(leader int32, now time.Time, settle time.Duration) []int32 {
	var out []int32
	for key, at := range r {
		if key.Leader == leader && now.Sub(at.last) <= unreachableReportTTL && now.Sub(at.first) >= settle && r.credible(key, now) {
			out = append(out, key.Follower)
		}
	}
	slices.Sort(out)
	return out
}

// reportedBy counts the followers with a current report of node.
func (r unreachableReports) reportedBy(node int32, now time.Time) int {
	n := 0
	for key, at := range r {
		if key.Leader == node && now.Sub(at.last) <= unreachableReportTTL {
			n++
		}
	}
	return n
}

// named reports whether a report made at or after since names node, as follower or leader.
func (r unreachableReports) named(node int32, since time.Time) bool {
	for key, at := range r {
		if (key.Leader == node || key.Follower == node) && !at.last.Before(since) {
			return true
		}
	}
	return false
}

// credible reports whether report is to be believed: its follower is reported by fewer followers
// than its leader. (When as many report each, as when two nodes' link is cut and each follows the
// other, neither can tell the other's case apart from its own; the leader keeps its leaderships
// and drops the follower after the lag time.)
func (r unreachableReports) credible(report UnreachableReport, now time.Time) bool {
	return r.reportedBy(report.Follower, now) < r.reportedBy(report.Leader, now)
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
