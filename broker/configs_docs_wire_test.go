package broker

// DescribeConfigs with include_documentation and include_synonyms, and the broker resource listing
// every setting the broker runs with.

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
)

func describeConfigsFull(c *testConn, version int16, resourceType kmsg.ConfigResourceType, name string, documentation, synonyms bool) kmsg.DescribeConfigsResponseResource {
	c.t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(version)
	req.IncludeDocumentation, req.IncludeSynonyms = documentation, synonyms
	resource := kmsg.NewDescribeConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = resourceType, name
	req.Resources = append(req.Resources, resource)
	resp := roundTrip[*kmsg.DescribeConfigsResponse](c, req)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		c.t.Fatalf("describe %v %q: %+v", resourceType, name, resp.Resources)
	}
	return resp.Resources[0]
}

func TestDescribeConfigsDocumentation(t *testing.T) {
	b := startBroker(t, nil)
	c := dial(t, b)
	c.createTopic("documented", 1, map[string]string{"retention.ms": "3600000"})
	node := strconv.Itoa(int(b.config.NodeID))

	for _, version := range []int16{3, 4} {
		for _, resource := range []struct {
			kind kmsg.ConfigResourceType
			name string
		}{{kmsg.ConfigResourceTypeTopic, "documented"}, {kmsg.ConfigResourceTypeBroker, node}} {
			described := describeConfigsFull(c, version, resource.kind, resource.name, true, false)
			for _, config := range described.Configs {
				if config.Documentation == nil || *config.Documentation == "" {
					t.Errorf("v%d %v %s: no documentation", version, resource.kind, config.Name)
				}
			}
			for _, config := range describeConfigsFull(c, version, resource.kind, resource.name, false, false).Configs {
				if config.Documentation != nil {
					t.Errorf("v%d %v %s: documentation %q not asked for", version, resource.kind, config.Name, *config.Documentation)
				}
			}
		}
	}

	broker := describeConfigsFull(c, 4, kmsg.ConfigResourceTypeBroker, node, false, true)
	configs := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, config := range broker.Configs {
		configs[config.Name] = config
		if !config.ReadOnly || config.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("broker config %s: read-only %v, source %v; want read-only STATIC_BROKER_CONFIG", config.Name, config.ReadOnly, config.Source)
		}
		if len(config.ConfigSynonyms) != 1 || config.ConfigSynonyms[0].Name != config.Name {
			t.Errorf("broker config %s: synonyms %+v", config.Name, config.ConfigSynonyms)
		}
	}
	want := map[string]string{
		"node.id":                      node,
		"listeners":                    "PLAINTEXT://" + b.Addr().String(),
		"log.dirs":                     b.config.DataDir,
		"group.min.session.timeout.ms": strconv.FormatInt(b.config.Groups.MinSessionTimeout.Milliseconds(), 10),
		"group.empty.retention.ms":     strconv.FormatInt(b.config.Groups.EmptyRetention.Milliseconds(), 10),
		"socket.request.max.bytes":     strconv.Itoa(b.config.MaxFrameBytes),
		"log.segment.bytes":            strconv.FormatInt(b.config.Log.SegmentBytes, 10),
		"min.insync.replicas":          "1",
		"compression.type":             "producer",
	}
	for name, value := range want {
		if got, ok := configs[name]; !ok || deref(got.Value) != value {
			t.Errorf("broker config %s = %v, want %q", name, deref(got.Value), value)
		}
	}
	for name := range configs {
		if _, ok := configInfos[name]; !ok {
			t.Errorf("broker config %s has no type or documentation", name)
		}
	}

	topic := describeConfigsFull(c, 4, kmsg.ConfigResourceTypeTopic, "documented", false, true)
	for _, config := range topic.Configs {
		if config.Name != coordinator.ConfigRetentionMs {
			continue
		}
		s := config.ConfigSynonyms
		if len(s) != 2 || s[0].Name != "retention.ms" || deref(s[0].Value) != "3600000" || s[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
			s[1].Name != "log.retention.ms" || s[1].Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("retention.ms synonyms: %+v", s)
		}
	}
}
