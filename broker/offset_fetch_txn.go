package broker

import (
	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

// markUnstable sets UNSTABLE_OFFSET_COMMIT on every fetched partition for which an open transaction
// holds a staged offset of the group (OffsetFetch with RequireStable).
func (b *Broker) markUnstable(group string, fetched []fetchedTopic) {
	transactions := b.coordinator.Transactions()
	for i := range fetched {
		for j := range fetched[i].partitions {
			p := &fetched[i].partitions[j]
			if transactions.HasStaged(group, coordinator.TopicPartition{Topic: fetched[i].topic, Partition: p.partition}) {
				p.errorCode = protocol.UnstableOffsetCommit.Code
			}
		}
	}
}
