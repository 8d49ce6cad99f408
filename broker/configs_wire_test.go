package broker

// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs over a real socket, checked against
// both the DescribeConfigs answer and the settings the partition logs actually run with.

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

// describedConfig is one config as DescribeConfigs answered it.
type describedConfig struct {
	value     string
	source    kmsg.ConfigSource
	isDefault bool // v0 only
	readOnly  bool
}

func describeConfigs(c *testConn, version int16, resourceType kmsg.ConfigResourceType, name string, keys ...string) (int16, map[string]describedConfig) {
	c.t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(version)
	resource := kmsg.NewDescribeConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = resourceType, name
	resource.ConfigNames = keys
	req.Resources = append(req.Resources, resource)
	resp := roundTrip[*kmsg.DescribeConfigsResponse](c, req)
	if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != name || resp.Resources[0].ResourceType != resourceType {
		c.t.Fatalf("describe %v %q: %+v", resourceType, name, resp.Resources)
	}
	configs := map[string]describedConfig{}
	for _, config := range resp.Resources[0].Configs {
		configs[config.Name] = describedConfig{deref(config.Value).(string), config.Source, config.IsDefault, config.ReadOnly}
	}
	return resp.Resources[0].ErrorCode, configs
}

// topicConfigs describes a topic's configs at v4 and fails unless that succeeds.
func topicConfigs(c *testConn, topic string) map[string]describedConfig {
	c.t.Helper()
	code, configs := describeConfigs(c, 4, kmsg.ConfigResourceTypeTopic, topic)
	if code != 0 {
		c.t.Fatalf("describe topic %q: error %d", topic, code)
	}
	return configs
}

// assertOverrides checks that exactly the given keys are overrides, with those values, and every
// other served key is its default (by config source: DescribeConfigs v1+ has no is_default).
func assertOverrides(t testing.TB, configs map[string]describedConfig, overrides map[string]string) {
	t.Helper()
	if len(configs) != len(coordinator.TopicConfigKeys()) {
		t.Errorf("%d configs described, want %d: %v", len(configs), len(coordinator.TopicConfigKeys()), configs)
	}
	for _, key := range coordinator.TopicConfigKeys() {
		config, ok := configs[key]
		switch want, overridden := overrides[key]; {
		case !ok:
			t.Errorf("%s not described", key)
		case overridden && (config.value != want || config.source != kmsg.ConfigSourceDynamicTopicConfig):
			t.Errorf("%s = %+v, want override %q with source DYNAMIC_TOPIC_CONFIG", key, config, want)
		case !overridden && config.source != kmsg.ConfigSourceDefaultConfig:
			t.Errorf("%s = %+v, want source DEFAULT_CONFIG", key, config)
		}
	}
}

func TestDescribeConfigs(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("configured", 1, map[string]string{"retention.ms": "3600000"})

	for version := int16(0); version <= 4; version++ {
		code, configs := describeConfigs(c, version, kmsg.ConfigResourceTypeTopic, "configured")
		if code != 0 {
			t.Fatalf("v%d: error %d", version, code)
		}
		if version == 0 { // no source field: is_default tells
			if configs["retention.ms"].value != "3600000" || configs["retention.ms"].isDefault || !configs["segment.bytes"].isDefault {
				t.Errorf("v0: %+v", configs)
			}
			continue
		}
		assertOverrides(t, configs, map[string]string{"retention.ms": "3600000"})
	}
	// Defaults are the broker's own settings, not Kafka's.
	configs := topicConfigs(c, "configured")
	if got, want := configs["segment.bytes"].value, strconv.FormatInt(b.config.Log.SegmentBytes, 10); got != want {
		t.Errorf("default segment.bytes %s, want the broker's %s", got, want)
	}
	if _, only := describeConfigs(c, 4, kmsg.ConfigResourceTypeTopic, "configured", "retention.ms"); len(only) != 1 || only["retention.ms"].value != "3600000" {
		t.Errorf("named key: %+v, want only retention.ms", only)
	}

	if code, configs := describeConfigs(c, 4, kmsg.ConfigResourceTypeTopic, "absent"); code != protocol.UnknownTopicOrPartition.Code || len(configs) != 0 {
		t.Errorf("unknown topic: error %d, %d configs; want 3 and none", code, len(configs))
	}

	for _, name := range []string{"1", ""} {
		code, configs := describeConfigs(c, 4, kmsg.ConfigResourceTypeBroker, name)
		if code != 0 || configs["broker.id"].value != "1" || !configs["broker.id"].readOnly {
			t.Errorf("broker %q: error %d, broker.id %+v", name, code, configs["broker.id"])
		}
		if configs["log.segment.bytes"].value != strconv.FormatInt(b.config.Log.SegmentBytes, 10) {
			t.Errorf("broker %q: log.segment.bytes %+v", name, configs["log.segment.bytes"])
		}
	}
	if code, _ := describeConfigs(c, 4, kmsg.ConfigResourceTypeBroker, "2"); code != protocol.InvalidRequest.Code {
		t.Errorf("another broker's configs: error %d, want 42", code)
	}
	if code, _ := describeConfigs(c, 4, kmsg.ConfigResourceTypeBrokerLogger, "1"); code != protocol.InvalidRequest.Code {
		t.Errorf("broker logger resource: error %d, want 42", code)
	}
}

func TestAlterConfigs(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	const topic = "altered"
	c.createTopic(topic, 1, map[string]string{"max.message.bytes": "100000"})

	alter := func(c *testConn, version int16, validateOnly bool, resourceType kmsg.ConfigResourceType, name string, configs ...string) int16 {
		c.t.Helper()
		req := kmsg.NewPtrAlterConfigsRequest()
		req.SetVersion(version)
		req.ValidateOnly = validateOnly
		resource := kmsg.NewAlterConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = resourceType, name
		for i := 0; i+1 < len(configs); i += 2 {
			config := kmsg.NewAlterConfigsRequestResourceConfig()
			config.Name, config.Value = configs[i], kmsg.StringPtr(configs[i+1])
			resource.Configs = append(resource.Configs, config)
		}
		req.Resources = append(req.Resources, resource)
		resp := roundTrip[*kmsg.AlterConfigsResponse](c, req)
		if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != name {
			c.t.Fatalf("alter %q: %+v", name, resp.Resources)
		}
		return resp.Resources[0].ErrorCode
	}
	type op struct {
		key   string
		op    kmsg.IncrementalAlterConfigOp
		value string
	}
	incremental := func(c *testConn, version int16, resourceType kmsg.ConfigResourceType, name string, ops ...op) int16 {
		c.t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.SetVersion(version)
		resource := kmsg.NewIncrementalAlterConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = resourceType, name
		for _, o := range ops {
			config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			config.Name, config.Op = o.key, o.op
			if o.op == kmsg.IncrementalAlterConfigOpSet || o.value != "" {
				config.Value = kmsg.StringPtr(o.value)
			}
			resource.Configs = append(resource.Configs, config)
		}
		req.Resources = append(req.Resources, resource)
		resp := roundTrip[*kmsg.IncrementalAlterConfigsResponse](c, req)
		if len(resp.Resources) != 1 || resp.Resources[0].ResourceName != name {
			c.t.Fatalf("incremental alter %q: %+v", name, resp.Resources)
		}
		return resp.Resources[0].ErrorCode
	}
	// logConfig is what the partition's log runs with.
	logConfig := func(t *testing.T) (time.Duration, int64) {
		t.Helper()
		p, err := b.registry.partition(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfg := p.log.Config()
		return cfg.RetentionTime, cfg.SegmentBytes
	}

	t.Run("AlterConfigs replaces the overrides", func(t *testing.T) {
		c := c.in(t)
		for version := int16(0); version <= 2; version++ {
			retention := strconv.Itoa(7200000 + int(version))
			if code := alter(c, version, false, kmsg.ConfigResourceTypeTopic, topic, "retention.ms", retention, "segment.bytes", "2097152"); code != 0 {
				t.Fatalf("v%d: error %d", version, code)
			}
			// max.message.bytes, set at creation and not named here, is gone: AlterConfigs replaces.
			assertOverrides(t, topicConfigs(c, topic), map[string]string{"retention.ms": retention, "segment.bytes": "2097152"})
			if retentionTime, segmentBytes := logConfig(t); retentionTime != time.Duration(7200000+int(version))*time.Millisecond || segmentBytes != 2097152 {
				t.Fatalf("v%d: log runs with retention %v, segment bytes %d", version, retentionTime, segmentBytes)
			}
		}
		if code := alter(c, 1, true, kmsg.ConfigResourceTypeTopic, topic, "retention.ms", "1"); code != 0 {
			t.Fatalf("validate only: error %d", code)
		}
		if configs := topicConfigs(c, topic); configs["retention.ms"].value != "7200002" {
			t.Fatalf("validate only changed retention.ms to %s", configs["retention.ms"].value)
		}
	})

	t.Run("IncrementalAlterConfigs sets and deletes", func(t *testing.T) {
		c := c.in(t)
		for version := int16(0); version <= 1; version++ {
			if code := incremental(c, version, kmsg.ConfigResourceTypeTopic, topic,
				op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, "86400000"}, op{"segment.bytes", kmsg.IncrementalAlterConfigOpSet, "4194304"}); code != 0 {
				t.Fatalf("v%d set: error %d", version, code)
			}
			assertOverrides(t, topicConfigs(c, topic), map[string]string{"retention.ms": "86400000", "segment.bytes": "4194304"})
			if retentionTime, segmentBytes := logConfig(t); retentionTime != 24*time.Hour || segmentBytes != 4194304 {
				t.Fatalf("v%d: log runs with retention %v, segment bytes %d", version, retentionTime, segmentBytes)
			}
			if code := incremental(c, version, kmsg.ConfigResourceTypeTopic, topic, op{key: "segment.bytes", op: kmsg.IncrementalAlterConfigOpDelete}); code != 0 {
				t.Fatalf("v%d delete: error %d", version, code)
			}
			assertOverrides(t, topicConfigs(c, topic), map[string]string{"retention.ms": "86400000"})
			if _, segmentBytes := logConfig(t); segmentBytes != b.config.Log.SegmentBytes {
				t.Fatalf("v%d: after DELETE the log runs with segment bytes %d, want the default %d", version, segmentBytes, b.config.Log.SegmentBytes)
			}
		}
	})

	t.Run("refusals leave the configs alone", func(t *testing.T) {
		c := c.in(t)
		before := topicConfigs(c, topic)
		for _, kv := range [][2]string{{"cleanup.policy", "compress"}, {"cleanup.policy", "compact,tidy"}, {"retention.ms", "soon"}, {"no.such.config", "1"}} {
			if code := alter(c, 2, false, kmsg.ConfigResourceTypeTopic, topic, kv[0], kv[1]); code != protocol.InvalidConfig.Code {
				t.Errorf("AlterConfigs %s=%s: error %d, want 40 INVALID_CONFIG", kv[0], kv[1], code)
			}
			if code := incremental(c, 1, kmsg.ConfigResourceTypeTopic, topic, op{kv[0], kmsg.IncrementalAlterConfigOpSet, kv[1]}); code != protocol.InvalidConfig.Code {
				t.Errorf("IncrementalAlterConfigs %s=%s: error %d, want 40 INVALID_CONFIG", kv[0], kv[1], code)
			}
		}
		for _, o := range []op{
			{"cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, "tidy"},
			{"cleanup.policy", kmsg.IncrementalAlterConfigOpSubtract, "delete"},
			{"no.such.config", kmsg.IncrementalAlterConfigOpDelete, ""},
		} {
			if code := incremental(c, 1, kmsg.ConfigResourceTypeTopic, topic, o); code != protocol.InvalidConfig.Code {
				t.Errorf("IncrementalAlterConfigs %+v: error %d, want 40", o, code)
			}
		}
		if code := incremental(c, 1, kmsg.ConfigResourceTypeTopic, topic,
			op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, "1000"}, op{"retention.ms", kmsg.IncrementalAlterConfigOpDelete, ""}); code != protocol.InvalidConfig.Code {
			t.Errorf("set and delete the same key: error %d, want 40", code)
		}
		if after := topicConfigs(c, topic); len(after) != len(before) || after["retention.ms"] != before["retention.ms"] || after["cleanup.policy"] != before["cleanup.policy"] {
			t.Errorf("configs changed by refused alters: %+v -> %+v", before, after)
		}
	})

	t.Run("other resources", func(t *testing.T) {
		c := c.in(t)
		if code := alter(c, 2, false, kmsg.ConfigResourceTypeBroker, "1", "log.retention.ms", "1000"); code != protocol.InvalidRequest.Code {
			t.Errorf("AlterConfigs broker: error %d, want 42", code)
		}
		if code := incremental(c, 1, kmsg.ConfigResourceTypeBroker, "1", op{"log.retention.ms", kmsg.IncrementalAlterConfigOpSet, "1000"}); code != protocol.InvalidRequest.Code {
			t.Errorf("IncrementalAlterConfigs broker: error %d, want 42", code)
		}
		if code := alter(c, 2, false, kmsg.ConfigResourceTypeTopic, "absent", "retention.ms", "1000"); code != protocol.UnknownTopicOrPartition.Code {
			t.Errorf("AlterConfigs unknown topic: error %d, want 3", code)
		}
		if code := incremental(c, 1, kmsg.ConfigResourceTypeTopic, "absent", op{"retention.ms", kmsg.IncrementalAlterConfigOpSet, "1000"}); code != protocol.UnknownTopicOrPartition.Code {
			t.Errorf("IncrementalAlterConfigs unknown topic: error %d, want 3", code)
		}
	})
}
