package coordinator

import (
	"context"
	"fmt"
)

// groupStateCommand is a command that changes group state rather than Metadata. The FSM applies
// it with applyGroupState; its apply (from command) is never called.
type groupStateCommand interface {
	command
	applyGroupState(state *GroupState) (next *GroupState, result applyResult)
}

// GroupState returns the latest group state snapshot: one atomic load; the result must not be
// modified. A change is visible here before WriteGroupState returns.
func (c *Coordinator) GroupState() *GroupState { return c.fsm.groupState.Load() }

// WriteGroupState applies one batch of group state changes as one Raft entry and returns once it
// applied (on this node too), or with an error wrapping ErrNotLeader, ErrTimeout or ErrClosed (the
// write may then still apply). Any node may call it: a node that is not the controller forwards
// the batch in one call, whose encoding (JSON, bodies in base64) must fit in one 16 MiB
// forwarding frame; a larger one fails at once. Callers batch: one call carries everything that
// changed since their last call. A write the FSM would refuse (a group without an id, an unknown
// group type, a share partition without a group or topic) is refused before it is proposed.
func (c *Coordinator) WriteGroupState(ctx context.Context, write GroupStateWrite) error {
	if write.Empty() {
		return nil
	}
	_, err := callController(c, ctx, opWriteGroupState, write, c.writeGroupState)
	return err
}

func (c *Coordinator) writeGroupState(ctx context.Context, write GroupStateWrite) (struct{}, error) {
	if err := write.validate(); err != nil {
		return struct{}{}, err
	}
	if write.Empty() {
		return struct{}{}, nil
	}
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	_, err := c.propose(ctx, &writeGroupStateCommand{GroupStateWrite: write})
	return struct{}{}, err
}

// validate checks what application requires of a write.
func (w GroupStateWrite) validate() error {
	for _, g := range w.Groups {
		if g.Group == "" || g.Record != nil && g.Record.Type != GroupTypeConsumer && g.Record.Type != GroupTypeShare {
			return fmt.Errorf("%w: write-group-state with group %q", errMalformedCommand, g.Group)
		}
	}
	for _, sp := range w.SharePartitions {
		if sp.Group == "" || sp.Topic == "" || sp.Partition < 0 {
			return fmt.Errorf("%w: write-group-state with share partition %q %q %d",
				errMalformedCommand, sp.Group, sp.Topic, sp.Partition)
		}
	}
	return nil
}

// AlterGroupConfigs changes a group's config overrides: with replaceAll they become exactly set,
// otherwise set entries are written and remove keys deleted. Values are validated with
// ValidateGroupConfigs (errors wrap ErrInvalidConfig); with validateOnly nothing changes. Any node
// may call it; a node that is not the controller forwards the call.
func (c *Coordinator) AlterGroupConfigs(ctx context.Context, group string, set map[string]string, remove []string,
	replaceAll, validateOnly bool) error {
	_, err := callController(c, ctx, opAlterGroupConfigs, alterGroupConfigsArgs{
		Group: group, Set: set, Remove: remove, ReplaceAll: replaceAll, ValidateOnly: validateOnly,
	}, c.alterGroupConfigs)
	return err
}

type alterGroupConfigsArgs struct {
	Group        string            `json:"group"`
	Set          map[string]string `json:"set,omitempty"`
	Remove       []string          `json:"remove,omitempty"`
	ReplaceAll   bool              `json:"replaceAll,omitempty"`
	ValidateOnly bool              `json:"validateOnly,omitempty"`
}

func (c *Coordinator) alterGroupConfigs(ctx context.Context, args alterGroupConfigsArgs) (struct{}, error) {
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	if args.Group == "" {
		return struct{}{}, fmt.Errorf("%w: empty group id", ErrInvalidConfig)
	}
	if err := ValidateGroupConfigs(args.Set); err != nil {
		return struct{}{}, err
	}
	if args.ValidateOnly {
		return struct{}{}, nil
	}
	_, err := c.propose(ctx, &alterGroupConfigsCommand{Group: args.Group, Set: args.Set, Remove: args.Remove, ReplaceAll: args.ReplaceAll})
	return struct{}{}, err
}

// writeGroupStateCommand is one batch of group state changes (write-group-state, 13).
type writeGroupStateCommand struct {
	GroupStateWrite
}

func (*writeGroupStateCommand) kind() commandType { return commandWriteGroupState }

func (*writeGroupStateCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

func (c *writeGroupStateCommand) applyGroupState(state *GroupState) (*GroupState, applyResult) {
	if err := c.validate(); err != nil {
		return nil, applyResult{err: err}
	}
	if c.Empty() {
		return nil, applyResult{}
	}
	return state.withWrite(c.GroupStateWrite), applyResult{}
}

// alterGroupConfigsCommand changes one group's config overrides (alter-group-configs, 14). Values
// were validated by the proposer.
type alterGroupConfigsCommand struct {
	Group      string            `json:"group"`
	Set        map[string]string `json:"set,omitempty"`
	Remove     []string          `json:"remove,omitempty"`
	ReplaceAll bool              `json:"replaceAll,omitempty"`
}

func (*alterGroupConfigsCommand) kind() commandType { return commandAlterGroupConfigs }

func (*alterGroupConfigsCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

func (c *alterGroupConfigsCommand) applyGroupState(state *GroupState) (*GroupState, applyResult) {
	if c.Group == "" {
		return nil, applyResult{err: fmt.Errorf("%w: alter-group-configs without a group", errMalformedCommand)}
	}
	return state.withConfigs(c.Group, alteredConfigs(state.Configs(c.Group), c.Set, c.Remove, c.ReplaceAll)), applyResult{}
}
