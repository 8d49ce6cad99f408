package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// Admin manages topics. Create one with NewAdmin; it shares the Client's connections and holds no
// state of its own.
type Admin struct {
	client *Client
}

// NewAdmin returns the admin calls of c.
func NewAdmin(c *Client) *Admin { return &Admin{client: c} }

// TopicSpec describes a topic to create. Partitions and ReplicationFactor of -1 take the broker's
// defaults.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// TopicDescription is a topic as metadata and DescribeConfigs show it.
type TopicDescription struct {
	Name       string
	Internal   bool
	Partitions []PartitionDescription
	Configs    map[string]string // every config the broker reports for the topic
}

// PartitionDescription is one partition of a described topic.
type PartitionDescription struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Err         error
}

// controllerConn returns a connection to the controller, where topic changes must go.
func (a *Admin) controllerConn(ctx context.Context) (*brokerConn, error) {
	id, err := a.client.metadata.controller(ctx)
	if err != nil {
		return nil, err
	}
	if id < 0 {
		return a.client.pool.anyConn(ctx, roleAdmin)
	}
	return a.client.pool.conn(ctx, id, roleAdmin)
}

// CreateTopics creates topics and waits until the broker has them (the request's timeout is ctx's
// deadline, or 30 s). The error joins one *KafkaError per topic that failed.
func (a *Admin) CreateTopics(ctx context.Context, topics ...TopicSpec) error {
	conn, err := a.controllerConn(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = timeoutMillis(ctx, 30*time.Second)
	for _, spec := range topics {
		topic := kmsg.NewCreateTopicsRequestTopic()
		topic.Topic, topic.NumPartitions, topic.ReplicationFactor = spec.Name, spec.Partitions, spec.ReplicationFactor
		for _, name := range sortedKeys(spec.Configs) {
			config := kmsg.NewCreateTopicsRequestTopicConfig()
			config.Name, config.Value = name, kmsg.StringPtr(spec.Configs[name])
			topic.Configs = append(topic.Configs, config)
		}
		req.Topics = append(req.Topics, topic)
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range raw.(*kmsg.CreateTopicsResponse).Topics {
		errs = append(errs, errorForCode("create topics", t.Topic, -1, t.ErrorCode, t.ErrorMessage))
	}
	return errors.Join(errs...)
}

// DeleteTopics deletes topics. The error joins one *KafkaError per topic that failed.
func (a *Admin) DeleteTopics(ctx context.Context, names ...string) error {
	conn, err := a.controllerConn(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = timeoutMillis(ctx, 30*time.Second)
	req.TopicNames = append(req.TopicNames, names...)
	for _, name := range names {
		topic := kmsg.NewDeleteTopicsRequestTopic()
		topic.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, topic)
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range raw.(*kmsg.DeleteTopicsResponse).Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		a.client.metadata.forget(name)
		errs = append(errs, errorForCode("delete topics", name, -1, t.ErrorCode, t.ErrorMessage))
	}
	return errors.Join(errs...)
}

// ListTopics returns the names of all topics, sorted; internal topics only with includeInternal.
func (a *Admin) ListTopics(ctx context.Context, includeInternal bool) ([]string, error) {
	resp, err := a.client.metadata.fetch(ctx, nil, true)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 && (includeInternal || !t.IsInternal) {
			names = append(names, *t.Topic)
		}
	}
	sort.Strings(names)
	return names, nil
}

// DescribeTopics returns partitions, leaders and configs of topics, in the order asked. A topic
// that does not exist fails the call with an error wrapping ErrUnknownTopic.
func (a *Admin) DescribeTopics(ctx context.Context, names ...string) ([]TopicDescription, error) {
	resp, err := a.client.metadata.fetch(ctx, names, false)
	if err != nil {
		return nil, err
	}
	byName := map[string]*TopicDescription{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode == protocol.TopicAuthorizationFailed.Code {
			return nil, newKafkaError("metadata", *t.Topic, -1, t.ErrorCode, nil) // it may exist: not ErrUnknownTopic
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownTopic, *t.Topic, newKafkaError("metadata", *t.Topic, -1, t.ErrorCode, nil))
		}
		d := &TopicDescription{Name: *t.Topic, Internal: t.IsInternal, Configs: map[string]string{}}
		for _, p := range t.Partitions {
			d.Partitions = append(d.Partitions, PartitionDescription{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
				Err: errorForCode("metadata", *t.Topic, p.Partition, p.ErrorCode, nil),
			})
		}
		sort.Slice(d.Partitions, func(i, j int) bool { return d.Partitions[i].Partition < d.Partitions[j].Partition })
		byName[d.Name] = d
	}
	conn, err := a.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range names {
		resource := kmsg.NewDescribeConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, name
		req.Resources = append(req.Resources, resource)
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, r := range raw.(*kmsg.DescribeConfigsResponse).Resources {
		if r.ErrorCode == protocol.TopicAuthorizationFailed.Code {
			continue // DESCRIBE without DESCRIBE_CONFIGS: the topic without its configs
		}
		if err := errorForCode("describe configs", r.ResourceName, -1, r.ErrorCode, r.ErrorMessage); err != nil {
			return nil, err
		}
		if d := byName[r.ResourceName]; d != nil {
			for _, config := range r.Configs {
				if config.Value != nil {
					d.Configs[config.Name] = *config.Value
				}
			}
		}
	}
	out := make([]TopicDescription, 0, len(names))
	for _, name := range names {
		d := byName[name]
		if d == nil {
			return nil, fmt.Errorf("%w %q: not in metadata", ErrUnknownTopic, name)
		}
		out = append(out, *d)
	}
	return out, nil
}

// ConfigChange is one change to a topic config: Value nil deletes the setting (back to the default).
type ConfigChange struct {
	Name  string
	Value *string
}

// SetConfig and DeleteConfig build ConfigChanges.
func SetConfig(name, value string) ConfigChange { return ConfigChange{Name: name, Value: &value} }

// DeleteConfig reverts a config to its default.
func DeleteConfig(name string) ConfigChange { return ConfigChange{Name: name} }

// AlterTopicConfigs applies changes to topic's configs (IncrementalAlterConfigs): settings not
// named stay as they are.
func (a *Admin) AlterTopicConfigs(ctx context.Context, topic string, changes ...ConfigChange) error {
	conn, err := a.controllerConn(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	resource := kmsg.NewIncrementalAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for _, change := range changes {
		config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		config.Name, config.Value = change.Name, change.Value
		config.Op = kmsg.IncrementalAlterConfigOpSet
		if change.Value == nil {
			config.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		resource.Configs = append(resource.Configs, config)
	}
	req.Resources = append(req.Resources, resource)
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range raw.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		errs = append(errs, errorForCode("alter configs", r.ResourceName, -1, r.ErrorCode, r.ErrorMessage))
	}
	return errors.Join(errs...)
}

// ListOffsets answers, for each partition of topic (all of them when none are named), the offset
// at: the start, the end, or the first record at or after a time (AtOffset is returned as given).
func (a *Admin) ListOffsets(ctx context.Context, topic string, at Offset, partitions ...int32) (map[int32]ListedOffset, error) {
	if len(partitions) == 0 {
		info, err := a.client.metadata.topic(ctx, topic)
		if err != nil {
			return nil, err
		}
		for i := range info.partitions {
			partitions = append(partitions, int32(i))
		}
	}
	out := make(map[int32]ListedOffset, len(partitions))
	if at.kind == offsetExact {
		for _, p := range partitions {
			out[p] = ListedOffset{Offset: at.value, LeaderEpoch: -1}
		}
		return out, nil
	}
	queries := make(map[TopicPartition]int64, len(partitions))
	for _, p := range partitions {
		queries[TopicPartition{topic, p}] = at.listOffsetsTimestamp()
	}
	listed, err := a.client.listOffsets(ctx, queries)
	if err != nil {
		return nil, err
	}
	for tp, l := range listed {
		out[tp.Partition] = l
	}
	return out, nil
}

func timeoutMillis(ctx context.Context, fallback time.Duration) int32 {
	if deadline, ok := ctx.Deadline(); ok {
		return int32(max(time.Until(deadline), time.Millisecond) / time.Millisecond)
	}
	return int32(fallback / time.Millisecond)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
