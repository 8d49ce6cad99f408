package broker

import (
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/replication"
)

// A broker whose controller session lapsed (no acknowledged heartbeat for the session timeout) may
// have been fenced, its partitions led elsewhere, without being able to learn it (a one-way cut:
// it hears nothing from the other nodes, or they nothing from it). It then stops acting as a
// leader until a heartbeat gets through: produce requests get NOT_LEADER_OR_FOLLOWER and waiting
// acks=all producers are answered with it, so clients go to the new leader at once instead of
// timing out on this one. Reads below the high watermark are still served.

// sessionLapseCheckInterval is how often waiting producers are checked against a lapsed session.
const sessionLapseCheckInterval = 100 * time.Millisecond

// sessionLapsed reports whether this broker must not act as a leader now.
func (b *Broker) sessionLapsed(now time.Time) bool {
	return b.coordinator != nil && b.coordinator.SessionExpired(now)
}

func errSessionLapsed(topic string, partition int32) error {
	return fmt.Errorf("broker: %s-%d: no controller session, leadership may have moved: %w", topic, partition, protocol.NotLeaderOrFollower)
}

// runSessionLapseCheck answers the waiting acks=all producers of every partition led here while
// the session is lapsed, and logs each lapse once.
func (b *Broker) runSessionLapseCheck() {
	defer b.background.Done()
	ticker := time.NewTicker(sessionLapseCheckInterval)
	defer ticker.Stop()
	lapsed := false
	for {
		select {
		case <-b.stop:
			return
		case <-ticker.C:
		}
		now := time.Now()
		if !b.sessionLapsed(now) {
			if lapsed {
				b.logger.Info("controller session renewed; leading again where the metadata says so")
			}
			lapsed = false
			continue
		}
		if !lapsed {
			b.logger.Warn("controller session lapsed: refusing produce and answering waiting acks=all producers until a heartbeat gets through")
		}
		lapsed = true
		b.registry.forEach(func(p *partition) {
			if role, _, _ := p.replica.State(); role == replication.RoleLeader {
				p.replica.AbandonWaiters(errSessionLapsed(p.topic, p.index))
			}
		})
	}
}
