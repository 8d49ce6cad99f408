package client

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/scram"
)

// CreateACLs stores ACL bindings. The error joins one *KafkaError per binding refused.
func (a *Admin) CreateACLs(ctx context.Context, bindings ...acl.Binding) error {
	conn, err := a.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bindings {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
		c.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
		c.Principal, c.Host = b.Principal, b.Host
		c.Operation, c.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		req.Creations = append(req.Creations, c)
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range raw.(*kmsg.CreateACLsResponse).Results {
		errs = append(errs, errorForCode("create acls", "", -1, r.ErrorCode, r.ErrorMessage))
	}
	return errors.Join(errs...)
}

// DescribeACLs returns the bindings the filter selects.
func (a *Admin) DescribeACLs(ctx context.Context, filter acl.Filter) ([]acl.Binding, error) {
	conn, err := a.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName = kmsg.ACLResourceType(filter.ResourceType), filter.ResourceName
	req.ResourcePatternType = kmsg.ACLResourcePatternType(filter.PatternType)
	req.Principal, req.Host = filter.Principal, filter.Host
	req.Operation, req.PermissionType = kmsg.ACLOperation(filter.Operation), kmsg.ACLPermissionType(filter.Permission)
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.DescribeACLsResponse)
	if err := errorForCode("describe acls", "", -1, resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var out []acl.Binding
	for _, r := range resp.Resources {
		for _, e := range r.ACLs {
			out = append(out, acl.Binding{ResourceType: acl.ResourceType(r.ResourceType), ResourceName: r.ResourceName,
				PatternType: acl.PatternType(r.ResourcePatternType), Principal: e.Principal, Host: e.Host,
				Operation: acl.Operation(e.Operation), Permission: acl.Permission(e.PermissionType)})
		}
	}
	return out, nil
}

// DeleteACLs removes the bindings each filter selects and returns those removed.
func (a *Admin) DeleteACLs(ctx context.Context, filters ...acl.Filter) ([]acl.Binding, error) {
	conn, err := a.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range filters {
		d := kmsg.NewDeleteACLsRequestFilter()
		d.ResourceType, d.ResourceName = kmsg.ACLResourceType(f.ResourceType), f.ResourceName
		d.ResourcePatternType = kmsg.ACLResourcePatternType(f.PatternType)
		d.Principal, d.Host = f.Principal, f.Host
		d.Operation, d.PermissionType = kmsg.ACLOperation(f.Operation), kmsg.ACLPermissionType(f.Permission)
		req.Filters = append(req.Filters, d)
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []acl.Binding
	var errs []error
	for _, r := range raw.(*kmsg.DeleteACLsResponse).Results {
		errs = append(errs, errorForCode("delete acls", "", -1, r.ErrorCode, r.ErrorMessage))
		for _, m := range r.MatchingACLs {
			out = append(out, acl.Binding{ResourceType: acl.ResourceType(m.ResourceType), ResourceName: m.ResourceName,
				PatternType: acl.PatternType(m.ResourcePatternType), Principal: m.Principal, Host: m.Host,
				Operation: acl.Operation(m.Operation), Permission: acl.Permission(m.PermissionType)})
		}
	}
	return out, errors.Join(errs...)
}

// ScramUser is one user's SCRAM credentials as the broker describes them.
type ScramUser struct {
	User       string
	Mechanisms map[scram.Mechanism]int // iterations per mechanism
}

// UpsertScramUser sets user's password for mechanism m. The password is salted here: only the
// salt and the salted password travel (AlterUserScramCredentials).
func (a *Admin) UpsertScramUser(ctx context.Context, m scram.Mechanism, user, password string, iterations int) error {
	salt, salted, err := scram.Salt(m, password, iterations)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, int8(m), int32(iterations), salt, salted
	req.Upsertions = append(req.Upsertions, u)
	return a.alterScram(ctx, req)
}

// DeleteScramUser removes user's credential for mechanism m.
func (a *Admin) DeleteScramUser(ctx context.Context, m scram.Mechanism, user string) error {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, int8(m)
	req.Deletions = append(req.Deletions, d)
	return a.alterScram(ctx, req)
}

func (a *Admin) alterScram(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) error {
	conn, err := a.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return err
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range raw.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		errs = append(errs, errorForCode("alter scram credentials", r.User, -1, r.ErrorCode, r.ErrorMessage))
	}
	return errors.Join(errs...)
}

// DescribeScramUsers describes the named users, or every user with none named.
func (a *Admin) DescribeScramUsers(ctx context.Context, users ...string) ([]ScramUser, error) {
	conn, err := a.client.pool.anyConn(ctx, roleAdmin)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, name := range users {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = name
		req.Users = append(req.Users, u)
	}
	raw, err := conn.roundTrip(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := errorForCode("describe scram credentials", "", -1, resp.ErrorCode, resp.ErrorMessage); err != nil {
		return nil, err
	}
	var out []ScramUser
	var errs []error
	for _, r := range resp.Results {
		if err := errorForCode("describe scram credentials", r.User, -1, r.ErrorCode, r.ErrorMessage); err != nil {
			errs = append(errs, err)
			continue
		}
		u := ScramUser{User: r.User, Mechanisms: map[scram.Mechanism]int{}}
		for _, info := range r.CredentialInfos {
			u.Mechanisms[scram.Mechanism(info.Mechanism)] = int(info.Iterations)
		}
		out = append(out, u)
	}
	return out, errors.Join(errs...)
}
