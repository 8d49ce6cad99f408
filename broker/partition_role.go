package broker

// A partition's role follows the metadata: the leader named there leads, every other replica
// follows it. Role changes reach the replication manager, which starts or stops fetching.

import (
	"time"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/segment"
)

// openPartition opens a local partition's log, epoch history and replica.
func (r *registry) openPartition(topic string, index int32, topicID [16]byte, logCfg segment.Config) (*partition, error) {
	log, err := r.openLog(topic, index, topicID, logCfg)
	if err != nil {
		return nil, err
	}
	p, err := newPartition(topic, index, topicID, log, r.replication)
	if err != nil {
		log.Close()
		return nil, err
	}
	return p, nil
}

// applyRole makes p lead or follow as pm says. Runs on the metadata subscription goroutine. Until
// this run of the broker is registered, a partition the metadata says it leads is left without a
// leader here: that leadership belongs to the previous run, whose log may have been longer, and the
// registration moves it to a new epoch.
func (r *registry) applyRole(p *partition, pm coordinator.Partition, registered bool) {
	if pm.Leader == r.nodeID && !registered {
		pm.Leader = -1
	}
	if pm.Leader == r.nodeID {
		newEpoch, err := p.replica.MakeLeader(pm.LeaderEpoch, partitionEpochOf(pm), pm.Replicas, pm.ISR, time.Now())
		if err != nil {
			r.logger.Error("become leader", "topic", p.topic, "partition", p.index, "epoch", pm.LeaderEpoch, "err", err)
			return
		}
		if newEpoch {
			// What this node knew of producers as a follower is stale: rebuild it from the log's
			// tail at the first idempotent append, which now includes what the old leader wrote.
			p.resetProducersAndTxns()
			r.leaderElections.Inc()
			r.logger.Debug("leading partition", "topic", p.topic, "partition", p.index, "epoch", pm.LeaderEpoch)
		}
		r.replicas.Lead(p.replica)
		p.appended() // parked fetches re-check the leadership
		return
	}
	changed := p.replica.MakeFollower(pm.Leader, pm.LeaderEpoch, partitionEpochOf(pm), pm.Replicas, pm.ISR)
	r.replicas.Follow(p.replica, pm.Leader, pm.LeaderEpoch, changed)
	if changed {
		p.appended()
	}
}

// partitionEpochOf reads the partition epoch (bumped by every leader or ISR change).
func partitionEpochOf(pm coordinator.Partition) int32 { return pm.PartitionEpoch }
