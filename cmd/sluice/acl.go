package main

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/acl"
)

const aclHelp = `Usage: sluice acl <create|list|delete> [flags]

ACLs: which principal may perform which operation on which resource (Kafka's model).

  sluice acl create --principal User:alice --operation read --topic orders
  sluice acl create --principal User:alice --operation write --topic logs. --prefixed
  sluice acl create --principal User:bob --operation all --group billing --deny
  sluice acl list [--principal User:alice] [--topic orders [--match]]
  sluice acl delete --principal User:alice --topic orders

Resources: --topic NAME, --group NAME, --transactional-id NAME, --cluster. Operations: all, read,
write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs,
idempotent-write. A DENY wins over every ALLOW; super users (sluiced --super-users) need none.
Run "sluice acl <subcommand> --help" for its flags.
`

func runACL(ctx context.Context, args []string, io streams) error {
	verb, rest, err := subcommand("acl", args, []string{"create", "list", "delete"}, io, aclHelp)
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		return aclCreate(ctx, rest, io)
	case "list":
		return aclList(ctx, rest, io)
	}
	return aclDelete(ctx, rest, io)
}

// aclFlags are the resource, principal and operation flags the acl subcommands share.
type aclFlags struct {
	principal, host, topic, group, transactionalID string
	cluster, prefixed, match, deny, allow          bool
	operations                                     stringList
}

func registerACLFlags(fs *commandFlags, f *aclFlags, forFilter bool) {
	fs.StringVar(&f.principal, "principal", "", "principal, Type:name (User:alice; User:* is everyone)")
	fs.StringVar(&f.host, "host", "", "client host (IP address) the ACL applies to (default: * when creating, any when filtering)")
	fs.StringVar(&f.topic, "topic", "", "topic resource")
	fs.StringVar(&f.group, "group", "", "consumer group resource")
	fs.StringVar(&f.transactionalID, "transactional-id", "", "transactional id resource")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	fs.BoolVar(&f.prefixed, "prefixed", false, "the resource name is a prefix (PREFIXED pattern); default LITERAL")
	fs.Var(&f.operations, "operation", "operation (read, write, describe, ...); repeatable")
	fs.BoolVar(&f.deny, "deny", false, "a DENY entry (default ALLOW)")
	if forFilter {
		fs.BoolVar(&f.match, "match", false, "select every ACL that applies to the named resource (literal, wildcard and prefixes)")
		fs.BoolVar(&f.allow, "allow", false, "only ALLOW entries")
	}
}

func (f *aclFlags) resource(command string, required bool) (acl.ResourceType, string, error) {
	var resourceType acl.ResourceType
	var name string
	count := 0
	for _, candidate := range []struct {
		set  bool
		kind acl.ResourceType
		name string
	}{{f.topic != "", acl.ResourceTopic, f.topic}, {f.group != "", acl.ResourceGroup, f.group},
		{f.transactionalID != "", acl.ResourceTransactionalID, f.transactionalID}, {f.cluster, acl.ResourceCluster, acl.ClusterName}} {
		if candidate.set {
			resourceType, name = candidate.kind, candidate.name
			count++
		}
	}
	if count > 1 {
		return 0, "", usageErrorf(command, "name one resource: --topic, --group, --transactional-id or --cluster")
	}
	if count == 0 {
		if required {
			return 0, "", usageErrorf(command, "name a resource: --topic, --group, --transactional-id or --cluster")
		}
		return acl.ResourceAny, "", nil
	}
	return resourceType, name, nil
}

func parseOperations(command string, names []string) ([]acl.Operation, error) {
	var out []acl.Operation
	for _, name := range names {
		op, ok := acl.ParseOperation(name)
		if !ok || op == acl.OperationUnknown || op == acl.OperationAny {
			return nil, usageErrorf(command, "unknown operation %q", name)
		}
		out = append(out, op)
	}
	return out, nil
}

func aclCreate(ctx context.Context, args []string, io streams) error {
	const command = "sluice acl create"
	fs := newFlags(command, "--principal P --operation OP (--topic T|--group G|--transactional-id ID|--cluster) [flags]", "Create ACLs (CreateAcls).")
	var f aclFlags
	registerACLFlags(fs, &f, false)
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	resourceType, name, err := f.resource(command, true)
	if err != nil {
		return err
	}
	if f.principal == "" || len(f.operations) == 0 {
		return usageErrorf(command, "--principal and at least one --operation are required")
	}
	operations, err := parseOperations(command, f.operations)
	if err != nil {
		return err
	}
	binding := acl.Binding{ResourceType: resourceType, ResourceName: name, PatternType: acl.PatternLiteral, Principal: f.principal,
		Host: f.host, Permission: acl.PermissionAllow}
	if f.prefixed {
		binding.PatternType = acl.PatternPrefixed
	}
	if f.deny {
		binding.Permission = acl.PermissionDeny
	}
	if binding.Host == "" {
		binding.Host = acl.WildcardHost
	}
	var bindings []acl.Binding
	for _, op := range operations {
		b := binding
		b.Operation = op
		if err := b.Validate(); err != nil {
			return usageErrorf(command, "%v", err)
		}
		bindings = append(bindings, b)
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	if err := s.admin().CreateACLs(rctx, bindings...); err != nil {
		return err
	}
	return printBindings(io, fs.globals.json, bindings)
}

func (f *aclFlags) filter(command string) (acl.Filter, error) {
	resourceType, name, err := f.resource(command, false)
	if err != nil {
		return acl.Filter{}, err
	}
	filter := acl.Filter{ResourceType: resourceType, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	if name != "" {
		filter.ResourceName = &name
	}
	switch {
	case f.prefixed && f.match:
		return filter, usageErrorf(command, "--prefixed and --match exclude each other")
	case f.prefixed:
		filter.PatternType = acl.PatternPrefixed
	case f.match:
		filter.PatternType = acl.PatternMatch
	case name != "":
		filter.PatternType = acl.PatternLiteral
	}
	if f.principal != "" {
		filter.Principal = &f.principal
	}
	if f.host != "" {
		filter.Host = &f.host
	}
	switch {
	case f.deny && f.allow:
		return filter, usageErrorf(command, "--deny and --allow exclude each other")
	case f.deny:
		filter.Permission = acl.PermissionDeny
	case f.allow:
		filter.Permission = acl.PermissionAllow
	}
	operations, err := parseOperations(command, f.operations)
	if err != nil {
		return filter, err
	}
	if len(operations) > 1 {
		return filter, usageErrorf(command, "filter by one --operation at most")
	}
	if len(operations) == 1 {
		filter.Operation = operations[0]
	}
	return filter, nil
}

func aclList(ctx context.Context, args []string, io streams) error {
	const command = "sluice acl list"
	fs := newFlags(command, "[filter flags]", "List ACLs (DescribeAcls); flags narrow the selection.")
	var f aclFlags
	registerACLFlags(fs, &f, true)
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	filter, err := f.filter(command)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	bindings, err := s.admin().DescribeACLs(rctx, filter)
	if err != nil {
		return err
	}
	return printBindings(io, fs.globals.json, bindings)
}

func aclDelete(ctx context.Context, args []string, io streams) error {
	const command = "sluice acl delete"
	fs := newFlags(command, "[filter flags]", "Delete the ACLs the flags select (DeleteAcls); with no flag at all, none is deleted.")
	var f aclFlags
	registerACLFlags(fs, &f, true)
	if _, err := fs.parse(args, io.out, 0, 0); err != nil {
		return err
	}
	if f.principal == "" && f.topic == "" && f.group == "" && f.transactionalID == "" && !f.cluster {
		return usageErrorf(command, "select what to delete: --principal and/or a resource")
	}
	filter, err := f.filter(command)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	deleted, err := s.admin().DeleteACLs(rctx, filter)
	if err != nil {
		return err
	}
	return printBindings(io, fs.globals.json, deleted)
}

type bindingRow struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Permission   string `json:"permission"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resource_type"`
	PatternType  string `json:"pattern_type"`
	ResourceName string `json:"resource_name"`
}

func printBindings(io streams, asJSON bool, bindings []acl.Binding) error {
	rows := []bindingRow{}
	for _, b := range bindings {
		rows = append(rows, bindingRow{b.Principal, b.Host, b.Permission.String(), b.Operation.String(), b.ResourceType.String(),
			b.PatternType.String(), b.ResourceName})
	}
	if asJSON {
		return writeJSON(io.out, rows)
	}
	t := newTable(io.out, "principal", "host", "permission", "operation", "resource", "pattern", "name")
	for _, r := range rows {
		t.row(r.Principal, r.Host, r.Permission, r.Operation, r.ResourceType, r.PatternType, r.ResourceName)
	}
	if len(rows) == 0 {
		fmt.Fprintln(io.err, "no ACLs")
	}
	return t.flush()
}
