package coordinator

import (
	"github.com/VictoriaMetrics/metrics"
)

// coordinatorMetrics are the controller's figures, registered in Config.Metrics (a private set when
// nil):
//   - sluice_controller_changes_total: times this node saw the controller change to a known node;
//   - sluice_controller_is_active: 1 while this node is the controller;
//   - sluice_brokers_fenced_total: brokers this node, as controller, fenced for a missed session;
//   - sluice_unreachable_leader_demotions_total: leaders this node, as controller, moved off
//     because every other in-sync member reported them unreachable (unreachable_leader.go);
//   - sluice_controller_failover_seconds: for each such fence, the time from the broker's last
//     heartbeat to the commit of the command that moved its leaderships (the metadata half of a
//     failover; brokers start serving as leaders when they apply it, within milliseconds);
//   - sluice_read_barriers_total / sluice_read_barrier_failures_total: read-barrier rounds this node
//     ran (read_barrier.go; one round serves every reader that queued meanwhile) and those that could
//     not confirm a fresh view (the readers were refused).
type coordinatorMetrics struct {
	controllerChanges *metrics.Counter
	brokersFenced     *metrics.Counter
	failoverSeconds   *metrics.Histogram
	// unreachableDemotions counts leaders moved off because their followers could not reach them.
	unreachableDemotions *metrics.Counter
	readBarriers         *metrics.Counter
	readBarrierFailures  *metrics.Counter
}

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
	return coordinatorMetrics{
		controllerChanges:    set.GetOrCreateCounter("sluice_controller_changes_total"),
		brokersFenced:        set.GetOrCreateCounter("sluice_brokers_fenced_total"),
		failoverSeconds:      set.GetOrCreateHistogram("sluice_controller_failover_seconds"),
		unreachableDemotions: set.GetOrCreateCounter("sluice_unreachable_leader_demotions_total"),
		readBarriers:         set.GetOrCreateCounter("sluice_read_barriers_total"),
		readBarrierFailures:  set.GetOrCreateCounter("sluice_read_barrier_failures_total"),
	}
}
