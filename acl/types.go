package acl

import (
	"fmt"
	"strings"
)

// ResourceType is Kafka's resource type code.
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the one cluster resource's name.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name, principal and host that match every one.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// PatternType is Kafka's pattern type code.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only
	PatternMatch    PatternType = 2 // filters only
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's ACL operation code.
type Operation int8

const (
	OperationUnknown         Operation = 0
	OperationAny             Operation = 1 // filters only
	OperationAll             Operation = 2
	OperationRead            Operation = 3
	OperationWrite           Operation = 4
	OperationCreate          Operation = 5
	OperationDelete          Operation = 6
	OperationAlter           Operation = 7
	OperationDescribe        Operation = 8
	OperationClusterAction   Operation = 9
	OperationDescribeConfigs Operation = 10
	OperationAlterConfigs    Operation = 11
	OperationIdempotentWrite Operation = 12
	OperationCreateTokens    Operation = 13
	OperationDescribeTokens  Operation = 14
)

// Permission is Kafka's permission type code.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Binding is one access control entry bound to a resource pattern.
type Binding struct {
	ResourceType ResourceType `json:"resourceType"`
	ResourceName string       `json:"resourceName"`
	PatternType  PatternType  `json:"patternType"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

// Validate reports what makes b unfit to be stored (CreateAcls answers INVALID_REQUEST).
func (b Binding) Validate() error {
	switch {
	case b.ResourceType < ResourceTopic || b.ResourceType > ResourceUser:
		return fmt.Errorf("acl: resource type %s cannot be bound", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("acl: pattern type %s cannot be bound", b.PatternType)
	case b.ResourceName == "":
		return fmt.Errorf("acl: empty resource name")
	case b.ResourceType == ResourceCluster && (b.ResourceName != ClusterName || b.PatternType != PatternLiteral):
		return fmt.Errorf("acl: the cluster resource is the literal %q", ClusterName)
	case b.Operation < OperationAll || b.Operation > OperationDescribeTokens:
		return fmt.Errorf("acl: operation %s cannot be bound", b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("acl: permission %s cannot be bound", b.Permission)
	case b.Host == "":
		return fmt.Errorf("acl: empty host")
	}
	kind, name, ok := strings.Cut(b.Principal, ":")
	if !ok || kind == "" || name == "" {
		return fmt.Errorf("acl: principal %q is not Type:name", b.Principal)
	}
	return nil
}

var resourceNames = map[ResourceType]string{ResourceUnknown: "unknown", ResourceAny: "any", ResourceTopic: "topic",
	ResourceGroup: "group", ResourceCluster: "cluster", ResourceTransactionalID: "transactional-id",
	ResourceDelegationToken: "delegation-token", ResourceUser: "user"}

var patternNames = map[PatternType]string{PatternUnknown: "unknown", PatternAny: "any", PatternMatch: "match",
	PatternLiteral: "literal", PatternPrefixed: "prefixed"}

var operationNames = map[Operation]string{OperationUnknown: "unknown", OperationAny: "any", OperationAll: "all",
	OperationRead: "read", OperationWrite: "write", OperationCreate: "create", OperationDelete: "delete",
	OperationAlter: "alter", OperationDescribe: "describe", OperationClusterAction: "cluster-action",
	OperationDescribeConfigs: "describe-configs", OperationAlterConfigs: "alter-configs",
	OperationIdempotentWrite: "idempotent-write", OperationCreateTokens: "create-tokens",
	OperationDescribeTokens: "describe-tokens"}

var permissionNames = map[Permission]string{PermissionUnknown: "unknown", PermissionAny: "any",
	PermissionDeny: "deny", PermissionAllow: "allow"}

func (t ResourceType) String() string { return name(resourceNames, t) }
func (t PatternType) String() string  { return name(patternNames, t) }
func (o Operation) String() string    { return name(operationNames, o) }
func (p Permission) String() string   { return name(permissionNames, p) }

func name[T ~int8](names map[T]string, value T) string {
	if n, ok := names[value]; ok {
		return n
	}
	return fmt.Sprintf("code-%d", int8(value))
}

// parse reads a name as String prints it (case-insensitive, '_' for '-').
func parse[T ~int8](names map[T]string, text string) (T, bool) {
	text = strings.ReplaceAll(strings.ToLower(text), "_", "-")
	for value, n := range names {
		if n == text {
			return value, true
		}
	}
	return 0, false
}

// ParseResourceType, ParsePatternType, ParseOperation and ParsePermission read the names String
// prints ("topic", "prefixed", "describe-configs", "allow"; case and '_' do not matter).
func ParseResourceType(s string) (ResourceType, bool) { return parse(resourceNames, s) }
func ParsePatternType(s string) (PatternType, bool)   { return parse(patternNames, s) }
func ParseOperation(s string) (Operation, bool)       { return parse(operationNames, s) }
func ParsePermission(s string) (Permission, bool)     { return parse(permissionNames, s) }
