package broker

// What DescribeConfigs says about each config it lists: its type (v3+) and its documentation (v3+,
// with include_documentation). The texts describe what sluice does with each setting.

import "github.com/twmb/franz-go/pkg/kmsg"

type configInfo struct {
	configType    kmsg.ConfigType
	documentation string
}

var configInfos = map[string]configInfo{
	// Topic configs (coordinator.TopicConfigKeys).
	"retention.ms":                   {kmsg.ConfigTypeLong, "How long the topic keeps a closed segment after its newest record, in milliseconds; -1 keeps segments whatever their age."},
	"retention.bytes":                {kmsg.ConfigTypeLong, "The size each partition's log may reach before its oldest segments are deleted; -1 sets no limit."},
	"segment.bytes":                  {kmsg.ConfigTypeInt, "The size at which a partition's active segment file is closed and a new one started."},
	"segment.ms":                     {kmsg.ConfigTypeLong, "The age, in milliseconds, at which the active segment is closed even if not full, so that retention can delete it."},
	"max.message.bytes":              {kmsg.ConfigTypeInt, "The largest record batch a produce request may append to the topic; larger ones are refused with MESSAGE_TOO_LARGE."},
	"cleanup.policy":                 {kmsg.ConfigTypeList, "What happens to old records: delete (retention deletes old segments), compact (the cleaner keeps the latest record of each key; records need keys), or both."},
	"delete.retention.ms":            {kmsg.ConfigTypeLong, "How long a tombstone (null value) of a compacted topic stays after the cleaning pass that first reached it, so that readers behind see the deletion."},
	"min.compaction.lag.ms":          {kmsg.ConfigTypeLong, "The least time a record of a compacted topic stays uncompacted."},
	"max.compaction.lag.ms":          {kmsg.ConfigTypeLong, "The longest a record of a compacted topic waits to become cleanable: the active segment rolls at this age, and a log this dirty is cleaned whatever its dirty ratio."},
	"min.cleanable.dirty.ratio":      {kmsg.ConfigTypeDouble, "How much of a compacted log must be uncleaned (dirty bytes over cleanable bytes) before the cleaner cleans it."},
	"min.insync.replicas":            {kmsg.ConfigTypeInt, "The fewest in-sync replicas with which an acks=all produce is accepted; below it the produce gets NOT_ENOUGH_REPLICAS."},
	"flush.messages":                 {kmsg.ConfigTypeLong, "Fsync a partition's log after this many appended messages; 1 fsyncs every append."},
	"flush.ms":                       {kmsg.ConfigTypeLong, "Fsync a partition's log at least this often, in milliseconds."},
	"message.timestamp.type":         {kmsg.ConfigTypeString, "CreateTime keeps the producer's record timestamps; LogAppendTime replaces them with the broker's clock at append."},
	"compression.type":               {kmsg.ConfigTypeString, "The codec batches are stored with; producer keeps each batch as the producer compressed it."},
	"unclean.leader.election.enable": {kmsg.ConfigTypeBoolean, "Whether a replica outside the in-sync set may become leader when no in-sync replica is left, at the cost of losing acknowledged records."},

	// Broker configs (broker_configs.go).
	"node.id":                          {kmsg.ConfigTypeInt, "This node's id in the cluster (the --node-id flag)."},
	"broker.id":                        {kmsg.ConfigTypeInt, "This broker's id in the cluster; the same as node.id."},
	"log.dirs":                         {kmsg.ConfigTypeString, "The data directory: partition logs under topics/, metadata under meta/."},
	"listeners":                        {kmsg.ConfigTypeString, "The named Kafka listeners and the addresses they are bound to, as NAME://host:port,..."},
	"advertised.listeners":             {kmsg.ConfigTypeString, "Each listener's address given to clients that came in on it, in Metadata and FindCoordinator answers."},
	"inter.broker.listener.name":       {kmsg.ConfigTypeString, "The listener other brokers dial: replication and transaction markers; its security also covers the Raft port."},
	"controller.quorum.voters":         {kmsg.ConfigTypeList, "The Raft voters holding the cluster metadata, as id@host:port; empty for a single node."},
	"broker.session.timeout.ms":        {kmsg.ConfigTypeInt, "A broker that has not heartbeaten to the controller for this long is fenced and its partitions are led elsewhere."},
	"broker.heartbeat.interval.ms":     {kmsg.ConfigTypeInt, "How often this broker heartbeats to the controller."},
	"auto.create.topics.enable":        {kmsg.ConfigTypeBoolean, "Whether Metadata requests that allow it create the unknown topics they name."},
	"num.partitions":                   {kmsg.ConfigTypeInt, "The partition count of auto-created topics and of CreateTopics requests that leave it at -1."},
	"default.replication.factor":       {kmsg.ConfigTypeShort, "The replication factor of auto-created topics and of CreateTopics requests that leave it at -1."},
	"message.max.bytes":                {kmsg.ConfigTypeInt, "The default of max.message.bytes for topics that do not set it."},
	"log.retention.ms":                 {kmsg.ConfigTypeLong, "The default of retention.ms."},
	"log.retention.bytes":              {kmsg.ConfigTypeLong, "The default of retention.bytes."},
	"log.segment.bytes":                {kmsg.ConfigTypeInt, "The default of segment.bytes."},
	"log.roll.ms":                      {kmsg.ConfigTypeLong, "The default of segment.ms."},
	"log.index.interval.bytes":         {kmsg.ConfigTypeInt, "How many log bytes lie between two entries of a segment's sparse offset index."},
	"log.flush.interval.messages":      {kmsg.ConfigTypeLong, "The default of flush.messages (1 when the broker fsyncs after every append)."},
	"log.flush.interval.ms":            {kmsg.ConfigTypeLong, "The default of flush.ms (set when the broker fsyncs on an interval)."},
	"log.retention.check.interval.ms":  {kmsg.ConfigTypeLong, "How often retention runs over every log."},
	"log.segment.delete.delay.ms":      {kmsg.ConfigTypeLong, "How long a segment removed by retention stays on disk for readers still using it."},
	"log.cleanup.policy":               {kmsg.ConfigTypeList, "The default of cleanup.policy."},
	"log.message.timestamp.type":       {kmsg.ConfigTypeString, "The default of message.timestamp.type."},
	"group.min.session.timeout.ms":     {kmsg.ConfigTypeInt, "The shortest session timeout a group member may ask for in JoinGroup."},
	"group.max.session.timeout.ms":     {kmsg.ConfigTypeInt, "The longest session timeout a group member may ask for in JoinGroup."},
	"group.initial.rebalance.delay.ms": {kmsg.ConfigTypeInt, "How long a group's first rebalance waits for more members to join."},
	"group.empty.retention.ms":         {kmsg.ConfigTypeLong, "How long a group whose last member left is kept, Empty, before it is forgotten (its committed offsets stay)."},
	"replica.lag.time.max.ms":          {kmsg.ConfigTypeLong, "A follower that has not caught up with its leader for this long leaves the in-sync replicas."},
	"replica.fetch.wait.max.ms":        {kmsg.ConfigTypeInt, "How long a follower's fetch waits at the leader for new records."},
	"replica.fetch.response.max.bytes": {kmsg.ConfigTypeInt, "The most record bytes a follower's fetch asks for across all its partitions."},
	"replica.fetch.max.bytes":          {kmsg.ConfigTypeInt, "The most record bytes a follower's fetch asks for per partition."},
	"socket.request.max.bytes":         {kmsg.ConfigTypeInt, "The largest request frame accepted; a larger one closes its connection."},
	"queued.max.request.bytes":         {kmsg.ConfigTypeLong, "The request bytes that may be in flight across all connections before the broker stops reading more."},
}

// configTypeOf is a config's DescribeConfigs type; Long where none is recorded.
func configTypeOf(name string) kmsg.ConfigType {
	if info, ok := configInfos[name]; ok {
		return info.configType
	}
	return kmsg.ConfigTypeLong
}

// configDocumentation is a config's documentation text, nil where none is recorded.
func configDocumentation(name string) *string {
	info, ok := configInfos[name]
	if !ok {
		return nil
	}
	doc := info.documentation
	return &doc
}
