// Package acl is Kafka's authorization model as pure policy: access control entries bound to
// resource patterns, the filters DescribeAcls and DeleteAcls select them with, and the decision
// whether a principal may perform an operation on a resource.
//
// The decision follows Kafka's authorizer (KIP-11, KIP-290):
//   - a super user may do anything;
//   - the bindings that apply to a resource are those of its type whose pattern matches its name:
//     LITERAL with the same name or the wildcard "*", PREFIXED with a prefix of the name;
//   - of those, the ones naming the principal (or "User:*") and the host (or "*") count;
//   - a DENY for the operation (or ALL) wins over everything;
//   - otherwise an ALLOW for the operation, ALL, or an operation that implies it (READ, WRITE,
//     DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) permits;
//   - with no binding at all on the resource, AllowEveryoneIfNoACL decides.
//
// Numeric values of ResourceType, PatternType, Operation and Permission are Kafka's wire codes.
// Invariant: a Set is immutable once built; an Authorizer holds no mutable state, so decisions
// need no lock. The package does no I/O.
package acl
