package coordinator

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// runLeadership keeps the published ControllerID in step with Raft. It is
// the one goroutine the Coordinator owns besides subscriptions; Close stops
// it.
//
// Raft's notifications only wake it: it always acts on Raft's live state, so
// a dropped or coalesced notification cannot leave a stale controller. When
// this node becomes leader it first establishes itself (see establish) and
// only then publishes its own id, so ControllerID == self implies the FSM has
// applied everything committed in earlier terms.
func (c *Coordinator) runLeadership() {
	defer close(c.leadershipDone)
	var establishedTerm uint64 // the term in which this node last established itself; 0 if none
	var retry <-chan time.Time
	lastController := int32(-1)
	for {
		if id := c.Metadata().ControllerID; id >= 0 && id != lastController {
			if lastController >= 0 {
				c.metrics.controllerChanges.Inc()
			}
			lastController = id
		}
		retry = nil
		_, leaderID := c.raft.LeaderWithID()
		self := raftServerID(c.config.NodeID)
		switch {
		case c.raft.State() == raft.Leader && leaderID == self:
			term := c.raft.CurrentTerm()
			if establishedTerm == term {
				break
			}
			c.view.setController(-1)
			if err := c.establish(); err != nil {
				c.logger.Warn("coordinator: could not take over as controller; retrying", "term", term, "error", err)
				retry = time.After(c.config.HeartbeatTimeout)
				break
			}
			establishedTerm = term
			c.recordDeposed(lastController)
			c.view.setController(c.config.NodeID)
			c.logger.Info("coordinator: this node is the controller", "node", c.config.NodeID, "term", term)
		default:
			establishedTerm = 0
			c.view.setController(nodeIDOf(leaderID))
		}
		select {
		case <-c.leadershipChanges:
		case <-c.observations:
		case <-retry:
		case <-c.stop:
			return
		}
	}
}

// establish runs when this node becomes leader: a barrier makes the FSM
// apply every earlier entry; then the node's own address in the Raft
// configuration is refreshed (a restart with an ephemeral port moves it) and
// the cluster id is created if the cluster has none.
func (c *Coordinator) establish() error {
	if err := c.raft.Barrier(c.config.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("coordinator: leadership barrier: %w", mapRaftError(err))
	}
	if err := c.refreshOwnAddress(); err != nil {
		return err
	}
	if c.fsm.state.Load().ClusterID != "" {
		return nil
	}
	return c.proposeAsLeader(&initClusterCommand{ClusterID: newClusterID()})
}

func (c *Coordinator) refreshOwnAddress() error {
	future := c.raft.GetConfiguration()
	if err := future.Error(); err != nil {
		return fmt.Errorf("coordinator: read raft configuration: %w", mapRaftError(err))
	}
	self, address := raftServerID(c.config.NodeID), c.transport.LocalAddr()
	for _, server := range future.Configuration().Servers {
		if server.ID != self || server.Address == address || server.Suffrage != raft.Voter {
			continue
		}
		c.logger.Info("coordinator: raft address changed", "from", server.Address, "to", address)
		if err := c.raft.AddVoter(self, address, 0, c.config.ApplyTimeout).Error(); err != nil {
			return fmt.Errorf("coordinator: update own raft address: %w", mapRaftError(err))
		}
	}
	return nil
}

// proposeAsLeader applies a command without the controller check that
// propose makes: establish runs before this node publishes itself as the
// controller.
func (c *Coordinator) proposeAsLeader(cmd command) error {
	entry, err := encodeCommand(cmd)
	if err != nil {
		return err
	}
	proposed := time.Now()
	future := c.raft.Apply(entry, c.config.ApplyTimeout)
	if err := future.Error(); err != nil {
		return fmt.Errorf("coordinator: apply %s: %w", cmd.kind(), mapRaftError(err))
	}
	c.metrics.applySeconds.UpdateDuration(proposed) // committed and applied
	if result, ok := future.Response().(applyResult); ok && result.err != nil {
		return result.err
	}
	return nil
}

// newClusterID returns a Kafka-style cluster id: 16 random bytes in
// unpadded URL-safe base64 (22 characters).
func newClusterID() string {
	var id [16]byte
	rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}
