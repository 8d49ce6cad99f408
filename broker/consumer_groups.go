package broker

// KIP-848 consumer groups coordinated by this broker: one consumergroup.Group per group id, under one
// lock, a ticker that removes members whose session or revocation time ran out, and a persister
// that writes every changed group's record (consumergroup.Group.Record) in one
// coordinator.WriteGroupState call per batch, so that membership, epochs and assignments survive a
// coordinator failover: the next coordinator loads the record at the group's first request and the
// members carry on at their epochs. Committed offsets are classic offsets (coordinator.Offsets).
//
// Lock order: consumerGroups.persistMu, then consumerGroups.mu.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/consumergroup"
	"github.com/sluice-mq/sluice/coordinator"
)

type consumerGroups struct {
	broker *Broker
	logger *slog.Logger

	mu struct {
		sync.Mutex
		groups map[string]*consumergroup.Group
		closed bool
	}
	persistMu   sync.Mutex
	persistWake chan struct{}
	done        chan struct{}
	stopped     chan struct{}
	started     bool
}

func newConsumerGroups(b *Broker, logger *slog.Logger) *consumerGroups {
	c := &consumerGroups{broker: b, logger: logger, persistWake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	c.mu.groups = map[string]*consumergroup.Group{}
	return c
}

func (c *consumerGroups) start() {
	c.started = true
	go c.run()
}

func (c *consumerGroups) close() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	c.mu.Unlock()
	close(c.done)
	if c.started {
		<-c.stopped
	}
}

// run ticks the groups and persists them until close, then persists once more.
func (c *consumerGroups) run() {
	defer close(c.stopped)
	ticker := time.NewTicker(shareTickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-c.done:
			c.persist()
			return
		case <-ticker.C:
			c.tick(time.Now())
		case <-c.persistWake:
			c.persist()
		}
	}
}

func (c *consumerGroups) wakePersister() {
	select {
	case c.persistWake <- struct{}{}:
	default:
	}
}

func (c *consumerGroups) tick(now time.Time) {
	c.mu.Lock()
	changed := false
	for _, g := range c.mu.groups {
		if d := g.NextDeadline(); !d.IsZero() && !d.After(now) {
			if removed := g.Tick(now); len(removed) > 0 {
				c.logger.Info("consumer group members removed", "group", g.ID(), "members", removed)
				changed = true
			}
		}
	}
	c.mu.Unlock()
	if changed {
		c.persist()
	}
}

// configFor is a group's policy from its group configs.
func (c *consumerGroups) configFor(id string) consumergroup.Config {
	configs := c.broker.shares.groupConfigs(id)
	config := consumergroup.DefaultConfig()
	config.SessionTimeout = configMillis(configs, coordinator.GroupConfigConsumerSessionTimeoutMs)
	config.HeartbeatInterval = min(configMillis(configs, coordinator.GroupConfigConsumerHeartbeatIntervalMs), config.SessionTimeout/2)
	return config
}

// groupLocked returns a group, loading it from its durable record or creating it.
func (c *consumerGroups) groupLocked(id string, create bool, now time.Time) *consumergroup.Group {
	config := c.configFor(id)
	if g, ok := c.mu.groups[id]; ok {
		g.SetConfig(config)
		return g
	}
	if record, ok := c.broker.coordinator.GroupState().Record(id); ok && record.Type == coordinator.GroupTypeConsumer {
		g, err := consumergroup.Load(id, config, record.Body, now)
		if err == nil {
			c.mu.groups[id] = g
			return g
		}
		c.logger.Error("consumer group record unreadable; starting the group afresh", "group", id, "err", err)
	}
	if !create {
		return nil
	}
	g := consumergroup.New(id, config)
	g.MarkDirty()
	c.mu.groups[id] = g
	return g
}

// known reports whether id is a KIP-848 consumer group.
func (c *consumerGroups) known(id string) bool {
	c.mu.Lock()
	_, ok := c.mu.groups[id]
	c.mu.Unlock()
	if ok {
		return true
	}
	record, ok := c.broker.coordinator.GroupState().Record(id)
	return ok && record.Type == coordinator.GroupTypeConsumer
}

// checkCommit validates an offset commit to a consumer group; handled is false for other groups.
func (c *consumerGroups) checkCommit(id, memberID string, epoch int32) (handled bool, err error) {
	if !c.known(id) {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groupLocked(id, false, time.Now())
	if g == nil {
		return false, nil
	}
	return true, g.CheckCommit(memberID, epoch)
}

// persist writes every changed group's record as one batch.
func (c *consumerGroups) persist() {
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	var write coordinator.GroupStateWrite
	var written []*consumergroup.Group
	c.mu.Lock()
	for id, g := range c.mu.groups {
		if g.Dirty() {
			write.Groups = append(write.Groups, coordinator.GroupRecordWrite{Group: id,
				Record: &coordinator.GroupRecord{Type: coordinator.GroupTypeConsumer, Body: g.Record()}})
			written = append(written, g)
		}
	}
	c.mu.Unlock()
	if write.Empty() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := c.broker.coordinator.WriteGroupState(ctx, write)
	cancel()
	if err == nil {
		return
	}
	if !errors.Is(err, coordinator.ErrClosed) {
		c.logger.Warn("consumer group state write failed; retrying", "groups", len(write.Groups), "err", err)
	}
	c.mu.Lock()
	for _, g := range written {
		g.MarkDirty()
	}
	c.mu.Unlock()
}
