package coordinator

import (
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/raft"
)

// coordinatorMetrics are the controller's figures, registered in Config.Metrics (a private set when
// nil):
//   - sluice_controller_changes_total: times this node saw the controller change to a known node;
//   - sluice_controller_is_active: 1 while this node is the controller;
//   - sluice_controller_id: the controller this node knows of, -1 while it knows none;
//   - sluice_brokers_fenced_total: brokers this node, as controller, fenced for a missed session;
//   - sluice_broker_probes_total / sluice_brokers_probed_dead_total: connection attempts this node,
//     as controller, made to silent brokers' listeners, and brokers it fenced because the attempt
//     was refused (liveness_probe.go; these are also counted in sluice_brokers_fenced_total);
//   - sluice_unreachable_leader_demotions_total: leaders this node, as controller, moved off
//     because every other in-sync member reported them unreachable (unreachable_leader.go);
//   - sluice_controller_failover_seconds: for each such fence, the time from the broker's last
//     heartbeat to the commit of the command that moved its leaderships (the metadata half of a
//     failover; brokers start serving as leaders when they apply it, within milliseconds);
//   - sluice_read_barriers_total / sluice_read_barrier_failures_total: read-barrier rounds this node
//     ran (read_barrier.go; one round serves every reader that queued meanwhile) and those that could
//     not confirm a fresh view (the readers were refused).
//
// Raft health of this node's metadata replica (0 until Raft has started):
//   - sluice_raft_apply_duration_seconds: commit latency, from proposing a command on the
//     controller to its application there (replicated to a majority, applied to the FSM);
//   - sluice_raft_leader_changes_total: leader changes this node observed;
//   - sluice_raft_term, sluice_raft_commit_index, sluice_raft_applied_index,
//     sluice_raft_last_log_index: the Raft positions (applied trailing commit means a slow FSM);
//   - sluice_raft_is_leader: 1 on the Raft leader;
//   - sluice_raft_last_contact_seconds: on a follower, time since it last heard from the leader
//     (0 on the leader, -1 on a follower that never heard from one).
type coordinatorMetrics struct {
	controllerChanges *metrics.Counter
	brokersFenced     *metrics.Counter
	brokerProbes      *metrics.Counter
	brokersProbedDead *metrics.Counter
	failoverSeconds   *metrics.PrometheusHistogram
	applySeconds      *metrics.PrometheusHistogram
	leaderChanges     *metrics.Counter
	// unreachableDemotions counts leaders moved off because their followers could not reach them.
	unreachableDemotions *metrics.Counter
	readBarriers         *metrics.Counter
	readBarrierFailures  *metrics.Counter
}

// durationBuckets are the upper bounds, in seconds, of the coordinator's histograms.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

func newCoordinatorMetrics(set *metrics.Set, c *Coordinator) coordinatorMetrics {
	if set == nil {
		set = metrics.NewSet()
	}
	set.GetOrCreateGauge("sluice_controller_is_active", func() float64 {
		if c.Metadata().ControllerID == c.config.NodeID {
			return 1
		}
		return 0
	})
	set.GetOrCreateGauge("sluice_controller_id", func() float64 { return float64(c.Metadata().ControllerID) })
	// The Raft gauges read Raft only once it has started (c.raft is set before raftStarted closes).
	raftGauge := func(name string, read func(r *raft.Raft) float64) {
		set.GetOrCreateGauge(name, func() float64 {
			select {
			case <-c.raftStarted:
				return read(c.raft)
			default:
				return 0
			}
		})
	}
	raftGauge("sluice_raft_term", func(r *raft.Raft) float64 { return float64(r.CurrentTerm()) })
	raftGauge("sluice_raft_applied_index", func(r *raft.Raft) float64 { return float64(r.AppliedIndex()) })
	raftGauge("sluice_raft_last_log_index", func(r *raft.Raft) float64 { return float64(r.LastIndex()) })
	raftGauge("sluice_raft_commit_index", func(r *raft.Raft) float64 {
		index, _ := strconv.ParseUint(r.Stats()["commit_index"], 10, 64)
		return float64(index)
	})
	raftGauge("sluice_raft_is_leader", func(r *raft.Raft) float64 {
		if r.State() == raft.Leader {
			return 1
		}
		return 0
	})
	raftGauge("sluice_raft_last_contact_seconds", func(r *raft.Raft) float64 {
		switch last := r.LastContact(); {
		case r.State() == raft.Leader:
			return 0
		case last.IsZero():
			return -1
		default:
			return time.Since(last).Seconds()
		}
	})
	return coordinatorMetrics{
		controllerChanges:    set.GetOrCreateCounter("sluice_controller_changes_total"),
		brokersFenced:        set.GetOrCreateCounter("sluice_brokers_fenced_total"),
		brokerProbes:         set.GetOrCreateCounter("sluice_broker_probes_total"),
		brokersProbedDead:    set.GetOrCreateCounter("sluice_brokers_probed_dead_total"),
		failoverSeconds:      set.GetOrCreatePrometheusHistogramExt("sluice_controller_failover_seconds", durationBuckets),
		applySeconds:         set.GetOrCreatePrometheusHistogramExt("sluice_raft_apply_duration_seconds", durationBuckets),
		leaderChanges:        set.GetOrCreateCounter("sluice_raft_leader_changes_total"),
		unreachableDemotions: set.GetOrCreateCounter("sluice_unreachable_leader_demotions_total"),
		readBarriers:         set.GetOrCreateCounter("sluice_read_barriers_total"),
		readBarrierFailures:  set.GetOrCreateCounter("sluice_read_barrier_failures_total"),
	}
}
