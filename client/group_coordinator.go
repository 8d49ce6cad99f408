package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// groupCoordinator finds a group's coordinator and holds the connections to it: a dedicated one
// for membership requests (JoinGroup and SyncGroup wait at the broker for the whole group, and a
// connection answers in request order, so they must not share one with anything else), and the
// pool's admin connection for offset commits and fetches.
type groupCoordinator struct {
	client *Client
	group  string

	mu struct {
		sync.Mutex
		nodeID     int32 // -1 when unknown
		address    string
		membership *brokerConn // dialled to address; nil or possibly failed
	}
}

func newGroupCoordinator(c *Client, group string) *groupCoordinator {
	g := &groupCoordinator{client: c, group: group}
	g.mu.nodeID = -1
	return g
}

// find returns the coordinator's node id and address, asking FindCoordinator when unknown.
func (g *groupCoordinator) find(ctx context.Context) (int32, string, error) {
	g.mu.Lock()
	nodeID, address := g.mu.nodeID, g.mu.address
	g.mu.Unlock()
	if nodeID >= 0 {
		return nodeID, address, nil
	}
	conn, err := g.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return -1, "", err
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = g.group, []string{g.group} // v0-3 and v4+
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return -1, "", err
	}
	resp := raw.(*kmsg.FindCoordinatorResponse)
	code, message := resp.ErrorCode, resp.ErrorMessage
	nodeID, host, port := resp.NodeID, resp.Host, resp.Port
	for _, c := range resp.Coordinators {
		if c.Key == g.group {
			code, message, nodeID, host, port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		}
	}
	if err := errorForCode("find coordinator", "", -1, code, message); err != nil {
		return -1, "", err
	}
	address = net.JoinHostPort(host, strconv.Itoa(int(port)))
	g.client.pool.setAddresses(map[int32]string{nodeID: address})
	g.mu.Lock()
	g.mu.nodeID, g.mu.address = nodeID, address
	g.mu.Unlock()
	return nodeID, address, nil
}

// forget drops the known coordinator (it answered NOT_COORDINATOR, or could not be reached).
func (g *groupCoordinator) forget() {
	g.mu.Lock()
	g.mu.nodeID, g.mu.address = -1, ""
	conn := g.mu.membership
	g.mu.membership = nil
	g.mu.Unlock()
	if conn != nil {
		go conn.shutdown()
	}
}

// membershipConn returns the dedicated connection to the coordinator, dialling it if needed.
func (g *groupCoordinator) membershipConn(ctx context.Context) (*brokerConn, error) {
	nodeID, address, err := g.find(ctx)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	conn := g.mu.membership
	g.mu.Unlock()
	if conn != nil && conn.alive() && conn.address == address {
		return conn, nil
	}
	conn, err = dialBroker(ctx, &g.client.cfg, nodeID, address)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	old := g.mu.membership
	g.mu.membership = conn
	g.mu.Unlock()
	if old != nil {
		go old.shutdown()
	}
	return conn, nil
}

// offsetsConn returns the pool's admin connection to the coordinator.
func (g *groupCoordinator) offsetsConn(ctx context.Context) (*brokerConn, error) {
	nodeID, _, err := g.find(ctx)
	if err != nil {
		return nil, err
	}
	return g.client.pool.conn(ctx, nodeID, roleAdmin)
}

// roundTrip sends req on the membership (or offsets) connection. A network error or a
// coordinator error code (which check extracts from the response) makes the coordinator
// forgotten, so the next call looks it up again.
func (g *groupCoordinator) roundTrip(ctx context.Context, membership bool, req kmsg.Request) (kmsg.Response, error) {
	var conn *brokerConn
	var err error
	if membership {
		conn, err = g.membershipConn(ctx)
	} else {
		conn, err = g.offsetsConn(ctx)
	}
	if err != nil {
		if errors.Is(err, ErrNetwork) || isCoordinatorError(err) {
			g.forget()
		}
		return nil, err
	}
	resp, err := conn.roundTrip(ctx, req)
	if err != nil {
		if errors.Is(err, ErrNetwork) {
			g.forget()
		}
		return nil, err
	}
	return resp, nil
}

// close shuts the membership connection.
func (g *groupCoordinator) close() {
	g.mu.Lock()
	conn := g.mu.membership
	g.mu.membership = nil
	g.mu.Unlock()
	if conn != nil {
		conn.shutdown()
	}
}

// isCoordinatorError reports the error codes that mean "ask FindCoordinator again".
func isCoordinatorError(err error) bool {
	return errors.Is(err, protocol.NotCoordinator) || errors.Is(err, protocol.CoordinatorNotAvailable) ||
		errors.Is(err, protocol.CoordinatorLoadInProgress)
}

// groupError builds the error for a group-level code, forgetting the coordinator when the code
// says it moved.
func (g *groupCoordinator) groupError(op string, code int16) error {
	err := errorForCode(op, "", -1, code, nil)
	if err != nil && isCoordinatorError(err) {
		g.forget()
	}
	return err
}

// commitOffsets commits offsets as member (memberID, generation; instanceID for static members).
// The error joins the partitions' errors.
func (g *groupCoordinator) commitOffsets(ctx context.Context, member memberIdentity, offsets map[TopicPartition]int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = g.group, member.generation, member.memberID
	if member.instanceID != "" {
		req.InstanceID = kmsg.StringPtr(member.instanceID)
	}
	topicIndex := map[string]int{}
	for tp, offset := range offsets {
		index, ok := topicIndex[tp.Topic]
		if !ok {
			index = len(req.Topics)
			topicIndex[tp.Topic] = index
			topic := kmsg.NewOffsetCommitRequestTopic()
			topic.Topic = tp.Topic
			req.Topics = append(req.Topics, topic)
		}
		part := kmsg.NewOffsetCommitRequestTopicPartition()
		part.Partition, part.Offset, part.LeaderEpoch = tp.Partition, offset, -1
		req.Topics[index].Partitions = append(req.Topics[index].Partitions, part)
	}
	raw, err := g.roundTrip(ctx, false, req)
	if err != nil {
		return err
	}
	var errs []error
	answered := 0
	for _, t := range raw.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			answered++
			if err := g.groupError("offset commit", p.ErrorCode); err != nil {
				var kafkaErr *KafkaError
				if errors.As(err, &kafkaErr) {
					kafkaErr.Topic, kafkaErr.Partition = t.Topic, p.Partition
				}
				errs = append(errs, err)
			}
		}
	}
	if answered < len(offsets) {
		errs = append(errs, fmt.Errorf("%w: offset commit answered %d of %d partitions", ErrMalformed, answered, len(offsets)))
	}
	return errors.Join(errs...)
}

// fetchOffsets returns the group's committed offsets of partitions; -1 where there is none.
// UNSTABLE_OFFSET_COMMIT (a transactional commit pending) is retried until ctx ends.
func (g *groupCoordinator) fetchOffsets(ctx context.Context, partitions []TopicPartition) (map[TopicPartition]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = g.group, true
	for _, group := range groupByTopic(partitions) {
		topic := kmsg.NewOffsetFetchRequestTopic()
		topic.Topic, topic.Partitions = group.topic, group.partitions
		req.Topics = append(req.Topics, topic)
	}
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		raw, err := g.roundTrip(ctx, false, req)
		if err != nil {
			return nil, err
		}
		resp := raw.(*kmsg.OffsetFetchResponse)
		err = g.groupError("offset fetch", resp.ErrorCode)
		out := make(map[TopicPartition]int64, len(partitions))
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err == nil {
					if err = errorForCode("offset fetch", t.Topic, p.Partition, p.ErrorCode, nil); err == nil {
						out[TopicPartition{t.Topic, p.Partition}] = p.Offset
					}
				}
			}
		}
		if errors.Is(err, protocol.UnstableOffsetCommit) {
			if err := sleepContext(ctx, backoff); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, tp := range partitions {
			if _, ok := out[tp]; !ok {
				out[tp] = -1
			}
		}
		return out, nil
	}
}

// memberIdentity is who a member is in one generation: what OffsetCommit, Heartbeat, SyncGroup
// and LeaveGroup name.
type memberIdentity struct {
	memberID   string
	instanceID string
	generation int32
}

// sleepContext waits for d or until ctx ends.
func sleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
