package broker

// FindCoordinator v0-v4. In a single-node cluster this broker coordinates every group and every
// transactional id: it answers with its own node id and advertised address. Key types: 0 group,
// 1 transaction; v4 batches keys. Refusals: another key type INVALID_REQUEST; an empty group key
// INVALID_REQUEST; shutting down or not the metadata leader COORDINATOR_NOT_AVAILABLE.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

const (
	coordinatorKeyGroup       int8 = 0
	coordinatorKeyTransaction int8 = 1
)

func (b *Broker) handleFindCoordinator(r *request, req *kmsg.FindCoordinatorRequest) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (int16, *string) {
		var err error
		switch {
		case req.CoordinatorType != coordinatorKeyGroup && req.CoordinatorType != coordinatorKeyTransaction:
			err = fmt.Errorf("broker: coordinator key type %d: %w", req.CoordinatorType, protocol.InvalidRequest)
		case key == "" && req.CoordinatorType == coordinatorKeyGroup:
			err = fmt.Errorf("broker: empty group id: %w", protocol.InvalidRequest)
		case b.closing.Load():
			err = errGroupsClosed
		}
		if err != nil {
			r.failed()
		}
		return protocol.CodeFor(err), errorMessage(err)
	}
	// The group's coordinator among the live brokers (groups.go); transactional ids are
	// coordinated the same way.
	owner := func(key string) (int32, string, int32) {
		id := b.groupCoordinatorFor(key)
		broker, ok := b.coordinator.Metadata().Brokers[id]
		if !ok {
			return -1, "", -1
		}
		host, port := b.endpointFor(r, broker)
		return broker.NodeID, host, port
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = find(req.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = owner(req.CoordinatorKey)
			if resp.NodeID < 0 {
				resp.ErrorCode = protocol.CoordinatorNotAvailable.Code
			}
		}
		r.respond(resp)
		return
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage = find(key)
		c.NodeID, c.Host, c.Port = -1, "", -1
		if c.ErrorCode == 0 {
			c.NodeID, c.Host, c.Port = owner(key)
			if c.NodeID < 0 {
				c.ErrorCode = protocol.CoordinatorNotAvailable.Code
			}
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	r.respond(resp)
}
