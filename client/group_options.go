package client

import (
	"context"
	"errors"
	"time"
)

// GroupOption configures a GroupConsumer. The options come in four groups: membership (balancers,
// timeouts, instance id), positions (reset policy), commits (interval, marks, commit on revoke)
// and callbacks; WithGroupConsumerOptions passes fetch options to the underlying Consumer. Every
// default is stated on the option that changes it.
type GroupOption func(*groupConfig)

type groupConfig struct {
	// Membership.
	groupProtocol     GroupProtocol
	serverAssignor    string // GroupProtocolConsumer: "" lets the broker choose
	balancers         []Balancer
	sessionTimeout    time.Duration
	rebalanceTimeout  time.Duration
	heartbeatInterval time.Duration
	instanceID        string
	retryBackoff      time.Duration

	// Positions.
	resetOffset Offset

	// Commits.
	autoCommitInterval time.Duration // 0: no periodic commits
	autoCommitMarks    bool
	commitOnRevoke     bool

	// Callbacks.
	onAssigned, onRevoked, onLost func(context.Context, []TopicPartition)

	consumerOptions []ConsumerOption
}

func defaultGroupConfig() groupConfig {
	return groupConfig{
		balancers:          []Balancer{CooperativeStickyBalancer()},
		sessionTimeout:     45 * time.Second,
		rebalanceTimeout:   60 * time.Second,
		heartbeatInterval:  3 * time.Second,
		retryBackoff:       100 * time.Millisecond,
		resetOffset:        AtStart(),
		autoCommitInterval: 5 * time.Second,
		commitOnRevoke:     true,
	}
}

func (c *groupConfig) validate() error {
	var errs []error
	if len(c.balancers) == 0 {
		errs = append(errs, errors.New("no balancers"))
	}
	names := map[string]bool{}
	for _, b := range c.balancers {
		if b.name == "" || b.assign == nil {
			errs = append(errs, errors.New("a zero Balancer (use RangeBalancer or CooperativeStickyBalancer)"))
		} else if names[b.name] {
			errs = append(errs, errors.New("balancer "+b.name+" named twice"))
		}
		names[b.name] = true
	}
	if c.sessionTimeout <= 0 || c.rebalanceTimeout <= 0 || c.heartbeatInterval <= 0 || c.retryBackoff <= 0 {
		errs = append(errs, errors.New("timeouts, heartbeat interval and retry backoff must be positive"))
	}
	if c.heartbeatInterval >= c.sessionTimeout {
		errs = append(errs, errors.New("heartbeat interval must be shorter than the session timeout"))
	}
	if c.groupProtocol > GroupProtocolConsumer {
		errs = append(errs, errors.New("unknown group protocol"))
	}
	if c.autoCommitInterval < 0 {
		errs = append(errs, errors.New("auto commit interval must not be negative"))
	}
	if c.resetOffset.kind == offsetExact {
		errs = append(errs, errors.New("reset offset must be AtStart, AtEnd or AtTime"))
	}
	return errors.Join(errs...)
}

// GroupProtocol is the membership protocol a GroupConsumer speaks with its coordinator.
type GroupProtocol uint8

const (
	// GroupProtocolClassic is JoinGroup/SyncGroup/Heartbeat: the members' leader runs the balancer.
	GroupProtocolClassic GroupProtocol = iota
	// GroupProtocolConsumer is KIP-848's ConsumerGroupHeartbeat: the broker assigns partitions
	// (WithServerAssignor), incrementally, revoking before it reassigns; commits carry the member
	// epoch. The group id must not be in use by a classic group (and the reverse).
	GroupProtocolConsumer
)

func (p GroupProtocol) String() string {
	if p == GroupProtocolConsumer {
		return "consumer"
	}
	return "classic"
}

// WithGroupProtocol chooses the membership protocol. With GroupProtocolConsumer the balancers,
// session timeout and heartbeat interval options are not used: the group's configs
// (consumer.session.timeout.ms, consumer.heartbeat.interval.ms) decide, and the broker assigns.
// Default: GroupProtocolClassic.
func WithGroupProtocol(p GroupProtocol) GroupOption {
	return func(c *groupConfig) { c.groupProtocol = p }
}

// WithServerAssignor names the broker-side assignor (GroupProtocolConsumer only: "uniform" or
// "range" on sluice and Kafka). Default: "" (the broker's default).
func WithServerAssignor(name string) GroupOption {
	return func(c *groupConfig) { c.serverAssignor = name }
}

// WithBalancers sets the assignment protocols this member offers, most preferred first. The group
// uses the one every member offers that most members prefer; the member behaves cooperatively or
// eagerly by the protocol chosen. Default: CooperativeStickyBalancer only.
func WithBalancers(balancers ...Balancer) GroupOption {
	return func(c *groupConfig) { c.balancers = append([]Balancer(nil), balancers...) }
}

// WithSessionTimeout sets how long the coordinator keeps the member without a heartbeat; the
// broker bounds it (sluice: 6 s to 30 min by default). Default: 45 s.
func WithSessionTimeout(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.sessionTimeout = d }
}

// WithRebalanceTimeout sets how long the coordinator waits for every member to rejoin during a
// rebalance, which includes the time revocation callbacks and commits take. Default: 60 s.
func WithRebalanceTimeout(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.rebalanceTimeout = d }
}

// WithHeartbeatInterval sets how often the background heartbeat runs; it is also how soon a
// member learns of a rebalance. It must be below the session timeout (a third of it is usual).
// Default: 3 s.
func WithHeartbeatInterval(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.heartbeatInterval = d }
}

// WithInstanceID makes the member static (group.instance.id, KIP-345): a member restarting with
// the same id within the session timeout gets its partitions back without a rebalance of the
// others. A static member does not leave the group on Close (its session timeout ends its
// membership), so that a restart is not a rebalance. Default: "" (dynamic membership).
func WithInstanceID(id string) GroupOption { return func(c *groupConfig) { c.instanceID = id } }

// WithGroupRetryBackoff sets the wait before retrying a failed coordinator request (the
// coordinator moved or is loading, the connection failed). Default: 100 ms.
func WithGroupRetryBackoff(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.retryBackoff = d }
}

// WithResetOffset sets where an assigned partition starts when the group has no committed offset
// for it, or when its committed offset is out of range (OFFSET_OUT_OF_RANGE: the log was
// truncated by retention past it): AtStart ("earliest"), AtEnd ("latest") or AtTime.
// Default: AtStart.
func WithResetOffset(at Offset) GroupOption { return func(c *groupConfig) { c.resetOffset = at } }

// WithAutoCommitInterval sets how often the positions of records Poll returned (or, with
// WithAutoCommitMarks, the marked offsets) are committed in the background; 0 turns periodic
// commits off (commits on revoke and Close still happen, see WithCommitOnRevoke). Default: 5 s.
func WithAutoCommitInterval(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.autoCommitInterval = d }
}

// WithAutoCommitMarks makes automatic commits (periodic, on revoke, on Close) commit the offsets
// marked with MarkRecords instead of the positions of every record Poll returned: records
// returned but not marked are delivered again after a rebalance. Default: off (commit positions).
func WithAutoCommitMarks() GroupOption { return func(c *groupConfig) { c.autoCommitMarks = true } }

// WithCommitOnRevoke chooses whether partitions are committed when they are revoked (after the
// OnRevoked callback) and on Close, so that their next owner starts exactly after the last record
// this member was given (or marked): a clean rebalance delivers nothing twice. Default: true.
func WithCommitOnRevoke(enabled bool) GroupOption {
	return func(c *groupConfig) { c.commitOnRevoke = enabled }
}

// WithOnAssigned sets a callback run when partitions are added to the member, once their start
// offsets were resolved (a partition whose resolution failed is retried at each heartbeat) and
// while Poll may already return records of them. Callbacks run on the group's
// background goroutine, one at a time; heartbeats wait while one runs, so it should return well
// within the session timeout. Default: none.
func WithOnAssigned(fn func(ctx context.Context, partitions []TopicPartition)) GroupOption {
	return func(c *groupConfig) { c.onAssigned = fn }
}

// WithOnRevoked sets a callback run when partitions are taken away in a rebalance or on Close:
// Poll returns no more records of them, and they are committed after the callback returns (so
// the callback may still MarkRecords or CommitOffsets). Eager protocols revoke everything before
// each rebalance; cooperative ones only what moves. Default: none.
func WithOnRevoked(fn func(ctx context.Context, partitions []TopicPartition)) GroupOption {
	return func(c *groupConfig) { c.onRevoked = fn }
}

// WithOnLost sets a callback run when partitions are lost rather than revoked: the member was
// dropped from the group (session expired, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), so they may
// already have another owner and are not committed. Default: the OnRevoked callback.
func WithOnLost(fn func(ctx context.Context, partitions []TopicPartition)) GroupOption {
	return func(c *groupConfig) { c.onLost = fn }
}

// WithGroupConsumerOptions configures the Consumer the group member reads through (fetch sizes,
// waits, buffer). Default: the Consumer's defaults.
func WithGroupConsumerOptions(opts ...ConsumerOption) GroupOption {
	return func(c *groupConfig) { c.consumerOptions = append(c.consumerOptions, opts...) }
}
