package broker

// DescribeConfigs v0-v4 for topics (every served topic config: the topic's override, source
// DYNAMIC_TOPIC_CONFIG, or the broker's default, source DEFAULT_CONFIG) and for this broker (every
// setting it runs with that has a Kafka name, read-only: none is dynamic; broker_configs.go). v1+
// include_synonyms lists the override and the broker default behind a topic config; v3+ answers
// carry config types, and include_documentation a text for each (config_docs.go). Unknown topics UNKNOWN_TOPIC_OR_PARTITION; other brokers' ids and
// other resource types INVALID_REQUEST.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/segment"
)

const (
	resourceTopic  = 2
	resourceBroker = 4

	sourceDynamicTopic = 1
	sourceStaticBroker = 4
	sourceDefault      = 5
)

type configEntry struct {
	name   string
	value  string
	source int8
}

// topicConfigDefaults is Kafka's default for each served topic config, replaced by the broker's
// own default where a flag sets one.
func (b *Broker) topicConfigDefaults() map[string]string {
	defaults := coordinator.TopicConfigDefaults()
	cfg := b.config.Log
	retention := int64(-1)
	if cfg.RetentionTime >= 0 {
		retention = cfg.RetentionTime.Milliseconds()
	}
	defaults[coordinator.ConfigRetentionMs] = strconv.FormatInt(retention, 10)
	defaults[coordinator.ConfigRetentionBytes] = strconv.FormatInt(cfg.RetentionBytes, 10)
	defaults[coordinator.ConfigSegmentBytes] = strconv.FormatInt(cfg.SegmentBytes, 10)
	defaults[coordinator.ConfigSegmentMs] = strconv.FormatInt(cfg.SegmentAge.Milliseconds(), 10)
	defaults[coordinator.ConfigMaxMessageBytes] = strconv.FormatInt(int64(b.config.MaxMessageBytes), 10)
	switch cfg.Flush {
	case segment.FlushOnAppend:
		defaults[coordinator.ConfigFlushMessages] = "1"
	case segment.FlushOnInterval:
		defaults[coordinator.ConfigFlushMs] = strconv.FormatInt(cfg.FlushInterval.Milliseconds(), 10)
	}
	return defaults
}

// topicConfigEntries lists a topic's configs (all, or those named), overrides first in source.
func (b *Broker) topicConfigEntries(overrides map[string]string, names []string) []configEntry {
	defaults := b.topicConfigDefaults()
	keys := coordinator.TopicConfigKeys()
	var entries []configEntry
	for _, key := range keys {
		if names != nil && !slices.Contains(names, key) {
			continue
		}
		if value, ok := overrides[key]; ok {
			entries = append(entries, configEntry{key, value, sourceDynamicTopic})
		} else {
			entries = append(entries, configEntry{key, defaults[key], sourceDefault})
		}
	}
	return entries
}

func (b *Broker) handleDescribeConfigs(r *request, req *kmsg.DescribeConfigsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	meta := b.coordinator.Metadata()
	anyError := false
	for _, resource := range req.Resources {
		result := kmsg.NewDescribeConfigsResponseResource()
		result.ResourceType, result.ResourceName = resource.ResourceType, resource.ResourceName
		var entries []configEntry
		readOnly := false
		var err error
		switch resource.ResourceType {
		case resourceTopic:
			if topic, ok := meta.Topics[resource.ResourceName]; ok {
				entries = b.topicConfigEntries(topic.Configs, resource.ConfigNames)
			} else {
				err = fmt.Errorf("broker: topic %q: %w", resource.ResourceName, protocol.UnknownTopicOrPartition)
			}
		case resourceBroker:
			if resource.ResourceName == "" || resource.ResourceName == strconv.Itoa(int(b.config.NodeID)) {
				entries, readOnly = b.brokerConfigEntries(resource.ConfigNames), true
			} else {
				err = fmt.Errorf("broker: node %d cannot describe broker %q: %w", b.config.NodeID, resource.ResourceName, protocol.InvalidRequest)
			}
		case resourceGroup:
			entries, err = b.groupConfigEntries(resource.ResourceName, resource.ConfigNames)
		default:
			err = fmt.Errorf("broker: resource type %d is not served: %w", resource.ResourceType, protocol.InvalidRequest)
		}
		if err != nil {
			result.ErrorCode, result.ErrorMessage = protocol.CodeFor(err), errorMessage(err)
			anyError = true
		}
		for _, e := range entries {
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			value := e.value
			c.Name, c.Value, c.ReadOnly, c.Source = e.name, &value, readOnly, kmsg.ConfigSource(e.source)
			c.IsDefault = e.source == sourceDefault
			c.ConfigType = configTypeOf(e.name)
			if req.IncludeDocumentation {
				c.Documentation = configDocumentation(e.name)
			}
			if req.IncludeSynonyms {
				c.ConfigSynonyms = b.configSynonyms(e, resource.ResourceType)
			}
			result.Configs = append(result.Configs, c)
		}
		resp.Resources = append(resp.Resources, result)
	}
	if anyError {
		r.failed()
	}
	r.respond(resp)
}

// sortConfigEntries orders entries by name.
func sortConfigEntries(entries []configEntry) {
	slices.SortFunc(entries, func(a, b configEntry) int { return strings.Compare(a.name, b.name) })
}

// configSynonyms are a config's synonyms in precedence order (v1+ with include_synonyms): the
// topic's override, then the broker default behind it.
func (b *Broker) configSynonyms(e configEntry, resourceType kmsg.ConfigResourceType) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	synonym := func(name, value string, source int8) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Value, s.Source = name, &value, kmsg.ConfigSource(source)
		return s
	}
	if resourceType == resourceBroker {
		return []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{synonym(e.name, e.value, e.source)}
	}
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	if e.source == sourceDynamicTopic {
		out = append(out, synonym(e.name, e.value, e.source))
	}
	if brokerKey, ok := brokerKeyOfTopicConfig[e.name]; ok {
		out = append(out, synonym(brokerKey, b.topicConfigDefaults()[e.name], sourceStaticBroker))
	}
	return out
}
