package broker

// Group configs (resource type GROUP, 32): share.auto.offset.reset, share.record.lock.duration.ms,
// share.delivery.count.limit, the share and consumer session and heartbeat settings. They live in
// the Raft coordinator (coordinator.AlterGroupConfigs) and apply to a group from its next request
// on. DescribeConfigs lists every served key (overrides with source DYNAMIC_GROUP_CONFIG, 8); an
// unknown key or a value out of bounds is INVALID_CONFIG; an empty group id INVALID_GROUP_ID.

import (
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

const (
	resourceGroup            = 32
	sourceDynamicGroupConfig = 8
)

// groupConfigEntries lists a group's configs (all, or those named).
func (b *Broker) groupConfigEntries(group string, names []string) ([]configEntry, error) {
	if group == "" {
		return nil, fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	overrides := b.coordinator.GroupState().Configs(group)
	defaults := coordinator.GroupConfigDefaults()
	var entries []configEntry
	for _, key := range coordinator.GroupConfigKeys() {
		if names != nil && !slices.Contains(names, key) {
			continue
		}
		if value, ok := overrides[key]; ok {
			entries = append(entries, configEntry{key, value, sourceDynamicGroupConfig})
		} else {
			entries = append(entries, configEntry{key, defaults[key], sourceDefault})
		}
	}
	return entries, nil
}

// alterGroupConfigs changes a group's config overrides.
func (b *Broker) alterGroupConfigs(group string, set map[string]string, remove []string, replaceAll, validateOnly bool) error {
	if group == "" {
		return fmt.Errorf("broker: empty group id: %w", protocol.InvalidGroupID)
	}
	ctx, cancel := adminContext(30_000)
	defer cancel()
	return b.coordinator.AlterGroupConfigs(ctx, group, set, remove, replaceAll, validateOnly)
}
