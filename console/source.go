package console

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterState is the cluster as Metadata, DescribeCluster, ListOffsets and DescribeLogDirs
// show it.
type clusterState struct {
	ClusterID    string
	ControllerID int32
	Brokers      []brokerState
	Topics       []topicState // by name
	// Partition counts by state: Online have a leader and a full ISR, UnderReplicated a leader
	// and a smaller ISR, Offline no leader.
	Online, UnderReplicated, Offline int
}

type brokerState struct {
	NodeID     int32
	Address    string
	Rack       string
	Controller bool
	// Fenced brokers are named as replicas but missing from metadata's broker list.
	Fenced                        bool
	LogDir                        string
	LogBytes, DiskTotal, DiskFree int64 // -1: unknown
	Leaders, Replicas             int
}

type topicState struct {
	Name       string
	Internal   bool
	Partitions []partitionState
	Error      string
	Unknown    bool // the broker has no such topic
}

type partitionState struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	// Invariant (as the broker reports them): LogStart <= LogEnd; -1 when unknown.
	LogStart, LogEnd int64
	SizeBytes        int64 // the leader's replica; -1 when unknown
	Error            string
}

// State names the partition's health for the pages.
func (p partitionState) State() string {
	switch {
	case p.Leader < 0:
		return "offline"
	case len(p.ISR) < len(p.Replicas):
		return "under-replicated"
	}
	return "online"
}

// Records is how many offsets the partition's log holds (0 when unknown).
func (p partitionState) Records() int64 {
	if p.LogStart < 0 || p.LogEnd < p.LogStart {
		return 0
	}
	return p.LogEnd - p.LogStart
}

func (t topicState) records() int64 {
	var n int64
	for _, p := range t.Partitions {
		if p.LogStart >= 0 && p.LogEnd >= p.LogStart {
			n += p.LogEnd - p.LogStart
		}
	}
	return n
}

func (t topicState) sizeBytes() int64 {
	var n int64
	for _, p := range t.Partitions {
		n += max(p.SizeBytes, 0)
	}
	return n
}

func (t topicState) replicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

func (c *clusterState) topic(name string) (topicState, bool) {
	i := sort.Search(len(c.Topics), func(i int) bool { return c.Topics[i].Name >= name })
	if i < len(c.Topics) && c.Topics[i].Name == name {
		return c.Topics[i], true
	}
	return topicState{}, false
}

// metadata asks for every topic (topics nil) or the named ones, and the cluster's brokers.
func metadata(ctx context.Context, raw *kgo.Client, topics ...string) (*clusterState, error) {
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) > 0 {
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
	}
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("console: metadata: %w", err)
	}
	return clusterFromMetadata(resp), nil
}

// clusterFromMetadata reads a metadata answer: brokers it lists are alive, replicas on brokers
// it does not list are on fenced ones (metadata leaves fenced brokers out).
func clusterFromMetadata(resp *kmsg.MetadataResponse) *clusterState {
	state := &clusterState{ControllerID: resp.ControllerID}
	if resp.ClusterID != nil {
		state.ClusterID = *resp.ClusterID
	}
	byID := map[int32]*brokerState{}
	for _, b := range resp.Brokers {
		broker := brokerState{NodeID: b.NodeID, Address: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))),
			Controller: b.NodeID == resp.ControllerID, LogBytes: -1, DiskTotal: -1, DiskFree: -1}
		if b.Rack != nil {
			broker.Rack = *b.Rack
		}
		state.Brokers = append(state.Brokers, broker)
	}
	for i := range state.Brokers {
		byID[state.Brokers[i].NodeID] = &state.Brokers[i]
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		topic := topicState{Name: *t.Topic, Internal: t.IsInternal}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			topic.Error, topic.Unknown = err.Error(), t.ErrorCode == kerr.UnknownTopicOrPartition.Code
		}
		for _, p := range t.Partitions {
			partition := partitionState{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, LogStart: -1, LogEnd: -1, SizeBytes: -1}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				partition.Error = err.Error()
			}
			topic.Partitions = append(topic.Partitions, partition)
		}
		sort.Slice(topic.Partitions, func(i, j int) bool { return topic.Partitions[i].Partition < topic.Partitions[j].Partition })
		state.Topics = append(state.Topics, topic)
	}
	sort.Slice(state.Topics, func(i, j int) bool { return state.Topics[i].Name < state.Topics[j].Name })
	for _, t := range state.Topics {
		for _, p := range t.Partitions {
			switch p.State() {
			case "offline":
				state.Offline++
			case "under-replicated":
				state.UnderReplicated++
			default:
				state.Online++
			}
			for _, id := range p.Replicas {
				if byID[id] == nil {
					state.Brokers = append(state.Brokers, brokerState{NodeID: id, Fenced: true, LogBytes: -1, DiskTotal: -1, DiskFree: -1})
					byID = reindex(state.Brokers)
				}
				byID[id].Replicas++
			}
			if b := byID[p.Leader]; b != nil {
				b.Leaders++
			}
		}
	}
	sort.Slice(state.Brokers, func(i, j int) bool { return state.Brokers[i].NodeID < state.Brokers[j].NodeID })
	return state
}

func reindex(brokers []brokerState) map[int32]*brokerState {
	byID := make(map[int32]*brokerState, len(brokers))
	for i := range brokers {
		byID[brokers[i].NodeID] = &brokers[i]
	}
	return byID
}

// fillOffsets sets LogStart and LogEnd of every partition of state (ListOffsets -2 and -1; kgo
// sends each partition's query to its leader).
func fillOffsets(ctx context.Context, raw *kgo.Client, state *clusterState) error {
	for _, timestamp := range []int64{-2, -1} {
		offsets, err := listOffsets(ctx, raw, state.Topics, timestamp)
		if err != nil {
			return err
		}
		for ti := range state.Topics {
			t := &state.Topics[ti]
			for pi := range t.Partitions {
				p := &t.Partitions[pi]
				offset, ok := offsets[topicPartition{t.Name, p.Partition}]
				if !ok {
					continue
				}
				if timestamp == -2 {
					p.LogStart = offset
				} else {
					p.LogEnd = offset
				}
			}
		}
	}
	return nil
}

type topicPartition struct {
	Topic     string
	Partition int32
}

func listOffsets(ctx context.Context, raw *kgo.Client, topics []topicState, timestamp int64) (map[topicPartition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, t := range topics {
		if len(t.Partitions) == 0 {
			continue
		}
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = t.Name
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.Partition, timestamp, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	out := map[topicPartition]int64{}
	if len(req.Topics) == 0 {
		return out, nil
	}
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("console: list offsets: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				out[topicPartition{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return out, nil
}

// fillSizes sets each partition's size (its leader's replica) and each broker's log and disk
// bytes, from DescribeLogDirs sent to every broker. A broker that does not answer keeps -1.
func fillSizes(ctx context.Context, raw *kgo.Client, state *clusterState) {
	req := kmsg.NewPtrDescribeLogDirsRequest() // Topics nil: every replica
	byID := reindex(state.Brokers)
	sizes := map[int32]map[topicPartition]int64{}
	for _, shard := range raw.RequestSharded(ctx, req) {
		if shard.Err != nil {
			continue
		}
		resp := shard.Resp.(*kmsg.DescribeLogDirsResponse)
		broker := byID[shard.Meta.NodeID]
		replicas := map[topicPartition]int64{}
		sizes[shard.Meta.NodeID] = replicas
		for _, dir := range resp.Dirs {
			if dir.ErrorCode != 0 {
				continue
			}
			var total int64
			for _, t := range dir.Topics {
				for _, p := range t.Partitions {
					replicas[topicPartition{t.Topic, p.Partition}] = p.Size
					total += p.Size
				}
			}
			if broker != nil {
				broker.LogDir, broker.LogBytes = dir.Dir, total
				broker.DiskTotal, broker.DiskFree = dir.TotalBytes, dir.UsableBytes
			}
		}
	}
	for ti := range state.Topics {
		t := &state.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if size, ok := sizes[p.Leader][topicPartition{t.Name, p.Partition}]; ok {
				p.SizeBytes = size
			}
		}
	}
}

// configEntry is one config as DescribeConfigs reports it.
type configEntry struct {
	Name, Value, Source string
	Sensitive, ReadOnly bool
	Documentation       string
}

// describeConfigs returns the configs of one resource (kmsg.ConfigResourceTypeTopic or
// ConfigResourceTypeBroker), sorted by name.
func describeConfigs(ctx context.Context, raw *kgo.Client, kind kmsg.ConfigResourceType, name string) ([]configEntry, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	resource := kmsg.NewDescribeConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kind, name
	req.Resources = append(req.Resources, resource)
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("console: describe configs of %s: %w", name, err)
	}
	var entries []configEntry
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("console: describe configs of %s: %w", name, err)
		}
		for _, c := range r.Configs {
			entry := configEntry{Name: c.Name, Source: configSource(c.Source), Sensitive: c.IsSensitive, ReadOnly: c.ReadOnly}
			switch {
			case c.IsSensitive:
				entry.Value = "(sensitive)"
			case c.Value != nil:
				entry.Value = *c.Value
			default:
				entry.Value = "(null)"
			}
			if c.Documentation != nil {
				entry.Documentation = *c.Documentation
			}
			entries = append(entries, entry)
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, nil
}

func configSource(source kmsg.ConfigSource) string {
	switch source {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "dynamic broker"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "dynamic default"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "static broker"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return source.String()
}
