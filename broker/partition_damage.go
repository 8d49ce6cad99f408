package broker

// Damaged leader logs: a follower fetch that fails on the leader's own damaged data
// (segment.ErrCorrupt) is reported to replication (Manager.LeaderReadDamaged), which asks the
// controller, through resignLeadership, to move leadership to an in-sync replica with an intact
// copy (coordinator.ResignLeadership). The follower meanwhile gets CORRUPT_MESSAGE and retries
// slowly; the damaged replica, once a follower, truncates at the damage and fetches it again.

import (
	"context"
	"fmt"
)

// resignLeadership is the replication Manager's Resigner.
func (b *Broker) resignLeadership(ctx context.Context, topic string, partition, leaderEpoch int32) error {
	if b.coordinator == nil {
		return fmt.Errorf("broker: resign leadership of %s-%d: no coordinator yet", topic, partition)
	}
	if _, err := b.coordinator.ResignLeadership(ctx, topic, partition, b.config.NodeID, leaderEpoch); err != nil {
		return fmt.Errorf("broker: resign leadership of %s-%d at epoch %d: %w", topic, partition, leaderEpoch, err)
	}
	return nil
}
