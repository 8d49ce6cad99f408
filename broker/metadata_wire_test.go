package broker

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func metadataRequest(version int16, allowAutoCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	req.AllowAutoTopicCreation = allowAutoCreate
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	if len(topics) == 0 && version > 0 {
		req.Topics = nil // all topics
	}
	return req
}

// onlyTopic returns the single topic of a Metadata response.
func onlyTopic(t testing.TB, resp *kmsg.MetadataResponse) kmsg.MetadataResponseTopic {
	t.Helper()
	if len(resp.Topics) != 1 {
		t.Fatalf("metadata v%d: %d topics, want 1", resp.Version, len(resp.Topics))
	}
	return resp.Topics[0]
}

// metadataVersions covers each layout change: controller id (v1), cluster id (v2), throttle (v3),
// allow auto creation (v4), offline replicas (v5), leader epochs (v7), authorized operations (v8),
// flexible (v9), topic ids (v10), v12 nullable names.
var metadataVersions = []int16{0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 12}

func TestMetadataWithoutAutoCreation(t *testing.T) {
	b := startBroker(t, func(cfg *Config) { cfg.AutoCreateTopics = false })
	c := dial(t, b)

	t.Run("unknown topic", func(t *testing.T) {
		c := c.in(t)
		for _, version := range metadataVersions {
			topic := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(version, true, "absent")))
			if topic.ErrorCode != protocol.UnknownTopicOrPartition.Code || deref(topic.Topic) != "absent" || len(topic.Partitions) != 0 {
				t.Errorf("v%d: %+v, want UNKNOWN_TOPIC_OR_PARTITION for %q", version, topic, "absent")
			}
		}
	})
	t.Run("invalid topic names", func(t *testing.T) {
		c := c.in(t)
		for _, name := range []string{"bad/name", strings.Repeat("a", 250), "..", "spaces are bad", ""} {
			for _, version := range []int16{1, 4, 12} {
				topic := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(version, true, name)))
				if topic.ErrorCode != protocol.InvalidTopicException.Code {
					t.Errorf("v%d %q: error %d, want 17 INVALID_TOPIC_EXCEPTION", version, name, topic.ErrorCode)
				}
			}
		}
	})
	t.Run("unknown topic id", func(t *testing.T) {
		c := c.in(t)
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = [16]byte{1, 2, 3}
		req.Topics = append(req.Topics, rt)
		topic := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, req))
		if topic.ErrorCode != protocol.UnknownTopicID.Code || topic.TopicID != rt.TopicID {
			t.Errorf("unknown topic id: %+v, want UNKNOWN_TOPIC_ID", topic)
		}
	})
	// Only the internal __consumer_offsets is listed.
	if resp := roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, true)); len(resp.Topics) != 1 || !resp.Topics[0].IsInternal {
		t.Fatalf("all topics after refusals: %d topics, want none created", len(resp.Topics))
	}
}

func TestMetadataAutoCreation(t *testing.T) {
	b := startBroker(t, func(cfg *Config) {
		cfg.DefaultPartitions = 3
		cfg.Advertise = "sluice.test:19092" // clients are told this, whatever the listener
	})
	c := dial(t, b)

	checkTopic := func(t *testing.T, version int16, topic kmsg.MetadataResponseTopic, name string) {
		t.Helper()
		if topic.ErrorCode != 0 || deref(topic.Topic) != name || topic.IsInternal {
			t.Fatalf("v%d: topic %+v, want %q without error", version, topic, name)
		}
		if len(topic.Partitions) != 3 {
			t.Fatalf("v%d: %q has %d partitions, want the default 3", version, name, len(topic.Partitions))
		}
		for i, p := range topic.Partitions {
			if p.Partition != int32(i) || p.ErrorCode != 0 || p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) {
				t.Errorf("v%d: partition %d: %+v", version, i, p)
			}
			if version >= 7 && p.LeaderEpoch < 0 {
				t.Errorf("v%d: partition %d has leader epoch %d", version, i, p.LeaderEpoch)
			}
		}
		if version >= 10 && topic.TopicID == [16]byte{} {
			t.Errorf("v%d: topic %q has a zero topic id", version, name)
		}
	}

	t.Run("v0-v3 always create, v4+ when allowed", func(t *testing.T) {
		c := c.in(t)
		for _, version := range metadataVersions {
			name := "auto-" + strconv.Itoa(int(version))
			if version >= 4 {
				refused := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(version, false, name)))
				if refused.ErrorCode != protocol.UnknownTopicOrPartition.Code {
					t.Fatalf("v%d without allow_auto_topic_creation: error %d, want 3", version, refused.ErrorCode)
				}
			}
			resp := roundTrip[*kmsg.MetadataResponse](c, metadataRequest(version, true, name))
			checkTopic(t, version, onlyTopic(t, resp), name)
			// Asked again, the topic exists: same answer.
			checkTopic(t, version, onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(version, false, name))), name)
		}
	})

	t.Run("brokers, controller and cluster id", func(t *testing.T) {
		c := c.in(t)
		for _, version := range metadataVersions {
			resp := roundTrip[*kmsg.MetadataResponse](c, metadataRequest(version, true, "auto-0"))
			if len(resp.Brokers) != 1 {
				t.Fatalf("v%d: %d brokers", version, len(resp.Brokers))
			}
			broker := resp.Brokers[0]
			if broker.NodeID != 1 || broker.Host != "sluice.test" || broker.Port != 19092 {
				t.Errorf("v%d: broker %+v, want node 1 at sluice.test:19092", version, broker)
			}
			if version >= 1 && resp.ControllerID != 1 {
				t.Errorf("v%d: controller id %d, want 1", version, resp.ControllerID)
			}
			if version >= 2 && (resp.ClusterID == nil || *resp.ClusterID == "") {
				t.Errorf("v%d: no cluster id", version)
			}
		}
	})

	t.Run("all topics", func(t *testing.T) {
		c := c.in(t)
		var want []string
		for _, version := range metadataVersions {
			want = append(want, "auto-"+strconv.Itoa(int(version)))
		}
		slices.Sort(want)
		for _, version := range metadataVersions {
			resp := roundTrip[*kmsg.MetadataResponse](c, metadataRequest(version, true))
			var got []string
			for _, topic := range resp.Topics {
				if deref(topic.Topic).(string) == "__consumer_offsets" {
					continue // internal (IsInternal from v1), checked in the group tests
				}
				got = append(got, deref(topic.Topic).(string))
				checkTopic(t, version, topic, deref(topic.Topic).(string))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("v%d all topics: %q, want %q", version, got, want)
			}
		}
	})

	t.Run("by topic id", func(t *testing.T) {
		c := c.in(t)
		known := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, false, "auto-12")))
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = known.TopicID
		req.Topics = append(req.Topics, rt)
		checkTopic(t, 12, onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, req)), "auto-12")
	})

	t.Run("invalid names are not created", func(t *testing.T) {
		c := c.in(t)
		topic := onlyTopic(t, roundTrip[*kmsg.MetadataResponse](c, metadataRequest(12, true, "bad/name")))
		if topic.ErrorCode != protocol.InvalidTopicException.Code {
			t.Fatalf("bad/name with auto-creation: error %d, want 17", topic.ErrorCode)
		}
	})
}

// TestMetadataAdvertisesListener checks the default advertised address: the bound listener.
func TestMetadataAdvertisesListener(t *testing.T) {
	b := startBroker(t, nil)
	resp := roundTrip[*kmsg.MetadataResponse](dial(t, b), metadataRequest(12, false))
	host, port, err := net.SplitHostPort(b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != host || strconv.Itoa(int(resp.Brokers[0].Port)) != port {
		t.Fatalf("brokers %+v, want %s", resp.Brokers, b.Addr())
	}
	// The advertised address is reachable: a client that dials it is served.
	conn, err := net.Dial("tcp", net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port))))
	if err != nil {
		t.Fatalf("dial advertised address: %v", err)
	}
	conn.Close()
}
