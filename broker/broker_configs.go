package broker

// The broker resource of DescribeConfigs: every setting this broker runs with that has a Kafka name,
// each read-only with source STATIC_BROKER_CONFIG, since sluiced takes them from flags at start and
// no broker config is dynamic (AlterConfigs and IncrementalAlterConfigs refuse broker resources).

import (
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/coordinator"
)

// brokerKeyOfTopicConfig names the broker default behind each topic config (Kafka's synonyms).
var brokerKeyOfTopicConfig = map[string]string{
	coordinator.ConfigRetentionMs:           "log.retention.ms",
	coordinator.ConfigRetentionBytes:        "log.retention.bytes",
	coordinator.ConfigSegmentBytes:          "log.segment.bytes",
	coordinator.ConfigSegmentMs:             "log.roll.ms",
	coordinator.ConfigMaxMessageBytes:       "message.max.bytes",
	coordinator.ConfigFlushMessages:         "log.flush.interval.messages",
	coordinator.ConfigFlushMs:               "log.flush.interval.ms",
	coordinator.ConfigCleanupPolicy:         "log.cleanup.policy",
	coordinator.ConfigMessageTimestampType:  "log.message.timestamp.type",
	coordinator.ConfigCompressionType:       "compression.type",
	coordinator.ConfigMinInsyncReplicas:     "min.insync.replicas",
	coordinator.ConfigUncleanLeaderElection: "unclean.leader.election.enable",
}

// brokerConfigs lists the broker's settings, sorted by name.
func (b *Broker) brokerConfigs() []configEntry {
	millis := func(d interface{ Milliseconds() int64 }) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	cfg := b.config
	voters := make([]string, 0, len(cfg.ControllerVoters))
	for _, v := range cfg.ControllerVoters {
		voters = append(voters, strconv.Itoa(int(v.NodeID))+"@"+v.RaftAddress)
	}
	values := map[string]string{
		"node.id":                          strconv.Itoa(int(cfg.NodeID)),
		"broker.id":                        strconv.Itoa(int(cfg.NodeID)),
		"log.dirs":                         cfg.DataDir,
		"listeners":                        b.boundListeners(),
		"advertised.listeners":             b.endpoints.text,
		"inter.broker.listener.name":       cfg.interBrokerSpec().Name,
		"controller.quorum.voters":         strings.Join(voters, ","),
		"broker.session.timeout.ms":        millis(cfg.BrokerSessionTimeout),
		"broker.heartbeat.interval.ms":     millis(cfg.BrokerHeartbeatInterval),
		"auto.create.topics.enable":        strconv.FormatBool(cfg.AutoCreateTopics),
		"num.partitions":                   strconv.Itoa(int(cfg.DefaultPartitions)),
		"default.replication.factor":       strconv.Itoa(int(cfg.DefaultReplicationFactor)),
		"log.index.interval.bytes":         strconv.FormatInt(cfg.Log.IndexIntervalBytes, 10),
		"log.retention.check.interval.ms":  millis(cfg.RetentionCheckInterval),
		"log.segment.delete.delay.ms":      millis(cfg.Log.FileDeleteDelay),
		"group.min.session.timeout.ms":     millis(cfg.Groups.MinSessionTimeout),
		"group.max.session.timeout.ms":     millis(cfg.Groups.MaxSessionTimeout),
		"group.initial.rebalance.delay.ms": millis(cfg.Groups.InitialRebalanceDelay),
		"group.empty.retention.ms":         millis(cfg.Groups.EmptyRetention),
		"replica.lag.time.max.ms":          millis(cfg.Replication.LagTimeMax),
		"replica.fetch.wait.max.ms":        millis(cfg.Replication.FetchMaxWait),
		"replica.fetch.response.max.bytes": strconv.Itoa(int(cfg.Replication.FetchMaxBytes)),
		"replica.fetch.max.bytes":          strconv.Itoa(int(cfg.Replication.PartitionMaxBytes)),
		"socket.request.max.bytes":         strconv.Itoa(cfg.MaxFrameBytes),
		"queued.max.request.bytes":         strconv.FormatInt(cfg.MaxInFlightBytes, 10),
	}
	for topicKey, value := range b.topicConfigDefaults() {
		if brokerKey, ok := brokerKeyOfTopicConfig[topicKey]; ok {
			values[brokerKey] = value
		}
	}
	entries := make([]configEntry, 0, len(values))
	for name, value := range values {
		entries = append(entries, configEntry{name, value, sourceStaticBroker})
	}
	sortConfigEntries(entries)
	return entries
}

// brokerConfigEntries lists the broker's settings, all or those named.
func (b *Broker) brokerConfigEntries(names []string) []configEntry {
	all := b.brokerConfigs()
	if names == nil {
		return all
	}
	var entries []configEntry
	for _, e := range all {
		for _, name := range names {
			if e.name == name {
				entries = append(entries, e)
				break
			}
		}
	}
	return entries
}
