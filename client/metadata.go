package client

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// topicInfo is what metadata says about one topic. Values are immutable once published: a refresh
// replaces the pointer in the cache.
type topicInfo struct {
	name       string
	id         [16]byte // zero when the broker answers Metadata below v10
	internal   bool
	partitions []partitionInfo // index = partition id
}

type partitionInfo struct {
	id          int32
	leader      int32 // -1 when there is none
	leaderEpoch int32
	replicas    []int32
	isr         []int32
	errorCode   int16
}

// metadataCache holds the last metadata seen per topic and refreshes it: on demand (a producer saw
// NOT_LEADER_OR_FOLLOWER), and every metadataMaxAge for topics in use.
type metadataCache struct {
	client *Client

	mu struct {
		sync.Mutex
		topics     map[string]*topicInfo
		inUse      map[string]struct{} // topics refreshed in the background
		controller int32
		listeners  map[uint64]func() // called after each background refresh, by subscription
		nextID     uint64
	}
	kick chan struct{} // capacity 1: a pending refresh request
}

func newMetadataCache(c *Client) *metadataCache {
	m := &metadataCache{client: c, kick: make(chan struct{}, 1)}
	m.mu.topics = make(map[string]*topicInfo)
	m.mu.inUse = make(map[string]struct{})
	m.mu.controller = -1
	return m
}

// cached returns the cached topic, or nil.
func (m *metadataCache) cached(topic string) *topicInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.topics[topic]
}

// use marks topic as refreshed in the background.
func (m *metadataCache) use(topic string) {
	m.mu.Lock()
	m.mu.inUse[topic] = struct{}{}
	m.mu.Unlock()
}

// subscribe registers fn to run after every background refresh, until the returned cancel runs.
func (m *metadataCache) subscribe(fn func()) (cancel func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.listeners == nil {
		m.mu.listeners = map[uint64]func(){}
	}
	m.mu.nextID++
	id := m.mu.nextID
	m.mu.listeners[id] = fn
	return func() {
		m.mu.Lock()
		delete(m.mu.listeners, id)
		m.mu.Unlock()
	}
}

// requestRefresh asks the background loop for a refresh soon; it never blocks.
func (m *metadataCache) requestRefresh() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// minRefreshInterval spaces background refreshes that errors trigger in bursts.
const minRefreshInterval = 50 * time.Millisecond

// run is the background refresh loop, owned by the Client.
func (m *metadataCache) run(stop <-chan struct{}) {
	ticker := time.NewTicker(m.client.cfg.metadataMaxAge)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		case <-m.kick:
		}
		m.mu.Lock()
		topics := make([]string, 0, len(m.mu.inUse))
		for topic := range m.mu.inUse {
			topics = append(topics, topic)
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), m.client.cfg.requestTimeout)
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if len(topics) > 0 {
			m.fetch(ctx, topics, false)
		}
		cancel()
		m.mu.Lock()
		listeners := make([]func(), 0, len(m.mu.listeners))
		for _, fn := range m.mu.listeners {
			listeners = append(listeners, fn)
		}
		m.mu.Unlock()
		for _, fn := range listeners {
			fn()
		}
		select {
		case <-stop:
			return
		case <-time.After(minRefreshInterval):
		}
	}
}

// fetch asks any broker for metadata of topics (all topics when all is true) and updates the cache
// and the broker addresses.
func (m *metadataCache) fetch(ctx context.Context, topics []string, all bool) (*kmsg.MetadataResponse, error) {
	conn, err := m.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = m.client.cfg.allowAutoTopicCreation
	if !all {
		req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
		for _, topic := range topics {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, t)
		}
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.MetadataResponse)
	addresses := make(map[int32]string, len(resp.Brokers))
	for _, b := range resp.Brokers {
		addresses[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	m.client.pool.setAddresses(addresses)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.controller = resp.ControllerID
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode != 0 && len(t.Partitions) == 0 {
			delete(m.mu.topics, *t.Topic)
			continue
		}
		info := &topicInfo{name: *t.Topic, id: t.TopicID, internal: t.IsInternal, partitions: make([]partitionInfo, len(t.Partitions))}
		complete := true
		for _, p := range t.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(t.Partitions) {
				complete = false
				break
			}
			info.partitions[p.Partition] = partitionInfo{
				id: p.Partition, leader: p.Leader, leaderEpoch: p.LeaderEpoch,
				replicas: p.Replicas, isr: p.ISR, errorCode: p.ErrorCode,
			}
		}
		if complete {
			m.mu.topics[info.name] = info
		}
	}
	return resp, nil
}

// unknownTopicRetries is how many more times a topic that a broker does not know is asked for
// before it counts as nonexistent: in a cluster, a topic just created on the controller reaches
// the other brokers' metadata moments later.
const unknownTopicRetries = 4

// topic returns metadata for topic, fetching it when not cached. A topic that does not exist yields
// ErrUnknownTopic (after unknownTopicRetries more tries); one whose leaders are still being elected
// is asked for again until ctx ends.
func (m *metadataCache) topic(ctx context.Context, topic string) (*topicInfo, error) {
	if info := m.cached(topic); info != nil {
		return info, nil
	}
	backoff := 10 * time.Millisecond
	for unknown := 0; ; {
		resp, err := m.fetch(ctx, []string{topic}, false)
		if err != nil {
			return nil, err
		}
		if info := m.cached(topic); info != nil {
			return info, nil
		}
		code := int16(0)
		for _, t := range resp.Topics {
			if t.Topic != nil && *t.Topic == topic {
				code = t.ErrorCode
			}
		}
		if code == protocol.TopicAuthorizationFailed.Code {
			return nil, newKafkaError("metadata", topic, -1, code, nil) // it may exist: not ErrUnknownTopic
		}
		if code != 0 && !protocol.ErrorCodeOf(code).Retriable {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownTopic, topic, newKafkaError("metadata", topic, -1, code, nil))
		}
		if code == protocol.UnknownTopicOrPartition.Code && !m.client.cfg.allowAutoTopicCreation {
			if unknown++; unknown > unknownTopicRetries {
				return nil, fmt.Errorf("%w %q: %w", ErrUnknownTopic, topic, newKafkaError("metadata", topic, -1, code, nil))
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// controller returns the controller's node id as last seen, fetching metadata when unknown.
func (m *metadataCache) controller(ctx context.Context) (int32, error) {
	m.mu.Lock()
	id := m.mu.controller
	m.mu.Unlock()
	if id >= 0 {
		return id, nil
	}
	resp, err := m.fetch(ctx, nil, false)
	if err != nil {
		return -1, err
	}
	return resp.ControllerID, nil
}

// forget drops topic from the cache (it was deleted).
func (m *metadataCache) forget(topic string) {
	m.mu.Lock()
	delete(m.mu.topics, topic)
	m.mu.Unlock()
}
