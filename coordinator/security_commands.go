package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/scram"
)

// ErrCredentialNotFound: a SCRAM credential to delete does not exist (RESOURCE_NOT_FOUND).
var ErrCredentialNotFound = errors.New("coordinator: no such SCRAM credential")

// securityCommand is a command that changes Security rather than Metadata. The FSM applies it
// with applySecurity; its apply (from command) is never called.
type securityCommand interface {
	command
	applySecurity(state *Security) (next *Security, result applyResult)
}

// securityResult is a security command's answer.
type securityResult struct {
	// Deleted holds, per filter of a delete-acls, the bindings it removed.
	Deleted [][]acl.Binding `json:"deleted,omitempty"`
	// Missing holds, per deletion of an alter-scram-credentials, whether the credential was
	// absent.
	Missing []bool `json:"missing,omitempty"`
}

// Security returns the latest security state: one atomic load; the result must not be modified.
func (c *Coordinator) Security() *Security { return c.fsm.security.Load() }

// CreateACLs stores bindings (validated with acl.Binding.Validate; errors wrap
// errMalformedCommand). Any node may call it; it returns once the change applied on this node.
func (c *Coordinator) CreateACLs(ctx context.Context, bindings []acl.Binding) error {
	_, err := callController(c, ctx, opCreateACLs, createACLsCommand{Bindings: bindings}, c.createACLs)
	return err
}

func (c *Coordinator) createACLs(ctx context.Context, args createACLsCommand) (struct{}, error) {
	for _, b := range args.Bindings {
		if err := b.Validate(); err != nil {
			return struct{}{}, fmt.Errorf("%w: %w", errMalformedCommand, err)
		}
	}
	if err := c.checkLeader(ctx); err != nil {
		return struct{}{}, err
	}
	_, err := c.propose(ctx, &args)
	return struct{}{}, err
}

// DeleteACLs removes the bindings each filter matches and returns them, per filter.
func (c *Coordinator) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	result, err := callController(c, ctx, opDeleteACLs, deleteACLsCommand{Filters: filters}, c.deleteACLs)
	return result.Deleted, err
}

func (c *Coordinator) deleteACLs(ctx context.Context, args deleteACLsCommand) (securityResult, error) {
	if err := c.checkLeader(ctx); err != nil {
		return securityResult{}, err
	}
	result, err := c.propose(ctx, &args)
	return result.security, err
}

// CredentialUpsert sets one user's credential for its mechanism.
type CredentialUpsert struct {
	User       string           `json:"user"`
	Credential scram.Credential `json:"credential"`
}

// CredentialDeletion removes one user's credential for a mechanism.
type CredentialDeletion struct {
	User      string          `json:"user"`
	Mechanism scram.Mechanism `json:"mechanism"`
}

// AlterScramCredentials applies deletions and upserts in one entry and reports, per deletion,
// ErrCredentialNotFound or nil. Upserts are validated before they are proposed (a credential
// without keys, iterations out of bounds, an empty user name: errMalformedCommand).
func (c *Coordinator) AlterScramCredentials(ctx context.Context, upserts []CredentialUpsert, deletions []CredentialDeletion) ([]error, error) {
	result, err := callController(c, ctx, opAlterScramCredentials, alterScramCredentialsCommand{Upserts: upserts, Deletions: deletions},
		c.alterScramCredentials)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(deletions))
	for i, missing := range result.Missing {
		if missing && i < len(errs) {
			errs[i] = fmt.Errorf("%w: %q %s", ErrCredentialNotFound, deletions[i].User, deletions[i].Mechanism)
		}
	}
	return errs, nil
}

func (c *Coordinator) alterScramCredentials(ctx context.Context, args alterScramCredentialsCommand) (securityResult, error) {
	if err := args.validate(); err != nil {
		return securityResult{}, err
	}
	if err := c.checkLeader(ctx); err != nil {
		return securityResult{}, err
	}
	result, err := c.propose(ctx, &args)
	return result.security, err
}

// createACLsCommand adds bindings; duplicates of stored ones change nothing.
type createACLsCommand struct {
	Bindings []acl.Binding `json:"bindings"`
}

func (*createACLsCommand) kind() commandType { return commandCreateACLs }

func (*createACLsCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

func (c *createACLsCommand) applySecurity(state *Security) (*Security, applyResult) {
	for _, b := range c.Bindings {
		if err := b.Validate(); err != nil {
			return nil, applyResult{err: fmt.Errorf("%w: %w", errMalformedCommand, err)}
		}
	}
	next := *state
	next.ACLs = state.ACLs.With(c.Bindings)
	return &next, applyResult{}
}

// deleteACLsCommand removes the bindings its filters match.
type deleteACLsCommand struct {
	Filters []acl.Filter `json:"filters"`
}

func (*deleteACLsCommand) kind() commandType { return commandDeleteACLs }

func (*deleteACLsCommand) apply(*Metadata) (*Metadata, applyResult) { return nil, applyResult{} }

func (c *deleteACLsCommand) applySecurity(state *Security) (*Security, applyResult) {
	kept, removed := state.ACLs.Without(c.Filters)
	result := applyResult{security: securityResult{Deleted: removed}}
	if len(kept.Bindings()) == len(state.ACLs.Bindings()) {
		return nil, result
	}
	next := *state
	next.ACLs = kept
	return &next, result
}

// alterScramCredentialsCommand deletes, then upserts, credentials.
type alterScramCredentialsCommand struct {
	Upserts   []CredentialUpsert   `json:"upserts,omitempty"`
	Deletions []CredentialDeletion `json:"deletions,omitempty"`
}

func (*alterScramCredentialsCommand) kind() commandType { return commandAlterScramCredentials }

func (*alterScramCredentialsCommand) apply(*Metadata) (*Metadata, applyResult) {
	return nil, applyResult{}
}

func (c *alterScramCredentialsCommand) validate() error {
	for _, u := range c.Upserts {
		cred := u.Credential
		if !validUserName(u.User) || !cred.Mechanism.Valid() || len(cred.Salt) == 0 ||
			cred.Iterations < scram.MinIterations || cred.Iterations > scram.MaxIterations ||
			len(cred.StoredKey) != cred.Mechanism.Size() || len(cred.ServerKey) != cred.Mechanism.Size() {
			return fmt.Errorf("%w: SCRAM credential of %q", errMalformedCommand, u.User)
		}
	}
	for _, d := range c.Deletions {
		if !validUserName(d.User) || !d.Mechanism.Valid() {
			return fmt.Errorf("%w: SCRAM deletion of %q", errMalformedCommand, d.User)
		}
	}
	return nil
}

func (c *alterScramCredentialsCommand) applySecurity(state *Security) (*Security, applyResult) {
	if err := c.validate(); err != nil {
		return nil, applyResult{err: err}
	}
	credentials := maps.Clone(state.Credentials)
	changed := false
	missing := make([]bool, len(c.Deletions))
	for i, d := range c.Deletions {
		if _, ok := credentials[d.User][d.Mechanism]; !ok {
			missing[i] = true
			continue
		}
		byMechanism := maps.Clone(credentials[d.User])
		delete(byMechanism, d.Mechanism)
		if len(byMechanism) == 0 {
			delete(credentials, d.User)
		} else {
			credentials[d.User] = byMechanism
		}
		changed = true
	}
	for _, u := range c.Upserts {
		byMechanism := maps.Clone(credentials[u.User])
		if byMechanism == nil {
			byMechanism = map[scram.Mechanism]scram.Credential{}
		}
		byMechanism[u.Credential.Mechanism] = u.Credential
		credentials[u.User] = byMechanism
		changed = true
	}
	result := applyResult{security: securityResult{Missing: missing}}
	if !changed {
		return nil, result
	}
	next := *state
	next.Credentials = credentials
	return &next, result
}
