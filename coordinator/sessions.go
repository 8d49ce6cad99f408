package coordinator

// Broker sessions. Every broker heartbeats to the controller (a forwarded call, or a local one on
// the controller). The controller remembers when it last heard from each broker, in memory only:
// a new controller grants every broker a fresh session. A broker silent for
// Config.BrokerSessionTimeout is fenced (fence-broker); a fenced broker that heartbeats again is
// unfenced (unfence-broker). A silent broker whose listener refuses connections is fenced sooner,
// without waiting for the timeout (liveness_probe.go). The controller never fences itself: it is
// plainly running, and a one-node cluster must not take its only broker offline over a slow heartbeat.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// liveness is the controller's record of heartbeats.
type liveness struct {
	mu sync.Mutex
	// lastSeen is nil while this node is not the controller.
	lastSeen map[int32]time.Time
	// takeover is when lastSeen was started afresh (this node's controllership began); deposed is
	// the controller this node took over from (-1: none known, or itself), set by runLeadership
	// before it publishes this node as the controller (liveness_probe.go).
	takeover time.Time
	deposed  int32
	// unreachable holds followers' recent reports of leaders they cannot reach
	// (unreachable_leader.go), on the controller.
	unreachable unreachableReports
}

// session is this node's heartbeat loop.
type session struct {
	mu      sync.Mutex
	stop    chan struct{} // nil while no session runs
	done    chan struct{}
	stopped bool // set by stopSession: no session starts again
	// renewed is when the last heartbeat that the controller acknowledged was sent (Unix
	// nanoseconds; 0 before the first): the controller saw this node alive at or after it.
	renewed atomic.Int64
}

// SessionExpired reports whether this broker has gone more than the session timeout without a
// heartbeat the controller acknowledged, so the controller may have fenced it and moved its
// leaderships. Its clock starts no later than the controller's, so this turns true no later than
// the controller fences. False before the first heartbeat.
func (c *Coordinator) SessionExpired(now time.Time) bool {
	renewed := c.session.renewed.Load()
	return renewed != 0 && now.Sub(time.Unix(0, renewed)) > c.config.BrokerSessionTimeout
}

func (c *Coordinator) sessionRenewed(sentAt time.Time) {
	for {
		old := c.session.renewed.Load()
		if sentAt.UnixNano() <= old || c.session.renewed.CompareAndSwap(old, sentAt.UnixNano()) {
			return
		}
	}
}

// StartSession starts heartbeating for broker (registered with RegisterBroker) until Close or
// ShutdownBroker. Calling it again while a session runs does nothing.
func (c *Coordinator) StartSession(broker Broker) {
	c.session.mu.Lock()
	defer c.session.mu.Unlock()
	if c.session.stop != nil || c.session.stopped {
		return
	}
	c.session.stop, c.session.done = make(chan struct{}), make(chan struct{})
	go c.runSession(broker.NodeID, c.session.stop, c.session.done)
}

// stopSession stops the heartbeat loop and waits for it.
func (c *Coordinator) stopSession() {
	c.session.mu.Lock()
	stop, done := c.session.stop, c.session.done
	c.session.stop, c.session.stopped = nil, true
	c.session.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (c *Coordinator) runSession(nodeID int32, stop, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(c.config.BrokerHeartbeatInterval)
	defer ticker.Stop()
	var lastWarning time.Time
	// behind is the controller's applied index that the last heartbeat could not catch up to (0:
	// none). While this node has not applied it, it does not heartbeat (see catchingUp).
	var behind uint64
	for {
		if c.catchingUp(nodeID, &behind) {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.config.BrokerSessionTimeout)
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		sentAt := time.Now()
		_, err := callController(c, ctx, opHeartbeat, nodeID, c.heartbeat)
		cancel()
		if err == nil {
			c.sessionRenewed(sentAt)
		}
		var lag *applyBehindError
		if errors.As(err, &lag) {
			behind = lag.controller
			c.logger.Warn("coordinator: this node cannot apply the controller's changes in time; no heartbeats until it has caught up, so that the controller fences it",
				"node", nodeID, "controller_index", lag.controller, "applied_index", lag.local)
		}
		if err != nil && time.Since(lastWarning) > 5*time.Second {
			lastWarning = time.Now()
			c.logger.Warn("coordinator: heartbeat to the controller failed", "node", nodeID, "error", err)
		}
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
	}
}

// catchingUp reports whether this node must stay silent because it has not yet applied *behind,
// the controller's index that its last heartbeat waited for in vain, and clears *behind once it
// has. A broker that cannot apply the controller's changes (its Raft log store fails, e.g. on a
// full disk, or its applying is stuck) acts on stale metadata and counts its own session as lapsed
// (SessionExpired), refusing produce; if it went on heartbeating, the controller would count it
// alive and leave it leading partitions it will not serve. Silent, it is fenced after the session
// timeout and its leaderships move; it heartbeats again, and is unfenced, once it has caught up.
func (c *Coordinator) catchingUp(nodeID int32, behind *uint64) bool {
	if *behind == 0 {
		return false
	}
	if c.fsm.appliedIndex() >= *behind {
		c.logger.Info("coordinator: caught up with the controller; heartbeating again", "node", nodeID, "index", *behind)
		*behind = 0
		return false
	}
	return true
}

// Heartbeat renews nodeID's session once, now, unfencing it if it was fenced (a broker calls it
// right after registering a new incarnation, so that it leads again before it says it serves).
func (c *Coordinator) Heartbeat(ctx context.Context, nodeID int32) error {
	sentAt := time.Now()
	_, err := callController(c, ctx, opHeartbeat, nodeID, c.heartbeat)
	if err == nil {
		c.sessionRenewed(sentAt)
	}
	return err
}

// heartbeat runs on the controller: it renews nodeID's session and unfences it if it was fenced.
func (c *Coordinator) heartbeat(ctx context.Context, nodeID int32) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	broker, registered := c.Metadata().Brokers[nodeID]
	if !registered {
		return struct{}{}, ErrInvalidBroker
	}
	c.liveness.mu.Lock()
	if c.liveness.lastSeen != nil {
		c.liveness.lastSeen[nodeID] = time.Now()
	}
	c.liveness.mu.Unlock()
	if broker.Fenced {
		c.logger.Info("coordinator: unfencing a broker that is back", "node", nodeID)
		if _, err := c.propose(ctx, &unfenceBrokerCommand{NodeID: nodeID}); err != nil {
			return struct{}{}, err
		}
	}
	return struct{}{}, nil
}

// runLiveness fences brokers whose session expired, and rebalances leadership to preferred
// replicas, while this node is the controller.
func (c *Coordinator) runLiveness() {
	defer close(c.livenessDone)
	ticker := time.NewTicker(c.config.BrokerHeartbeatInterval)
	defer ticker.Stop()
	rebalance := rebalancer{lastNoted: time.Now()} // rebalance.go
	for {
		select {
		case <-c.stop:
			return
		case <-ticker.C:
		}
		if !c.IsLeader() {
			rebalance.pending = nil
			c.liveness.mu.Lock()
			c.liveness.lastSeen = nil
			c.liveness.mu.Unlock()
			continue
		}
		now := time.Now()
		metadata := c.Metadata()
		var expired, probe []int32
		var silentSince []time.Time
		c.liveness.mu.Lock()
		if c.liveness.lastSeen == nil {
			c.liveness.lastSeen = map[int32]time.Time{} // a fresh session for everyone
			c.liveness.takeover = now
		}
		for _, id := range metadata.BrokerIDs() {
			seen, ok := c.liveness.lastSeen[id]
			if !ok {
				c.liveness.lastSeen[id], seen = now, now
			}
			if id == c.config.NodeID || metadata.Brokers[id].Fenced {
				continue
			}
			switch silent := now.Sub(seen); {
			case silent > c.config.BrokerSessionTimeout:
				expired = append(expired, id)
				silentSince = append(silentSince, seen)
			case probeDue(silent, c.config.BrokerProbeAfter, id == c.liveness.deposed && !seen.After(c.liveness.takeover)):
				probe = append(probe, id)
			}
		}
		c.liveness.mu.Unlock()
		for _, id := range expired {
			c.logger.Warn("coordinator: fencing a broker that missed its session", "node", id, "timeout", c.config.BrokerSessionTimeout)
		}
		if len(probe) > 0 {
			// A broker whose listener refuses connections is gone: fence it now (liveness_probe.go).
			for _, id := range c.probeBrokers(metadata, probe, c.config.BrokerHeartbeatInterval) {
				c.liveness.mu.Lock()
				seen := c.liveness.lastSeen[id]
				c.liveness.mu.Unlock()
				if seen.After(now) {
					continue // it heartbeated while the probe ran: a new process
				}
				c.logger.Warn("coordinator: fencing a silent broker whose listener refuses connections", "node", id, "silent_for", time.Since(seen).Round(time.Millisecond))
				expired = append(expired, id)
				silentSince = append(silentSince, seen)
				c.metrics.brokersProbedDead.Inc()
			}
		}
		for i, id := range expired {
			if err := c.proposeAsLeader(&fenceBrokerCommand{NodeID: id}); err != nil {
				c.logger.Warn("coordinator: fence broker", "node", id, "error", err)
				continue
			}
			c.metrics.brokersFenced.Inc()
			c.metrics.failoverSeconds.UpdateDuration(silentSince[i])
		}
		c.rebalanceStep(&rebalance, now)
	}
}
