package acl

import "strings"

// Filter selects bindings (DescribeAcls, DeleteAcls). A nil ResourceName, Principal or Host
// matches any; the ANY codes match any value.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether the filter selects b. PatternMatch selects the bindings that would
// apply to a resource of that name: the literal name, the literal wildcard, and prefixes of it.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

func (f Filter) matchesPattern(b Binding) bool {
	switch f.PatternType {
	case PatternAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case PatternMatch:
		if f.ResourceName == nil {
			return true
		}
		name := *f.ResourceName
		switch b.PatternType {
		case PatternLiteral:
			return b.ResourceName == name || b.ResourceName == WildcardResource
		case PatternPrefixed:
			return strings.HasPrefix(name, b.ResourceName)
		}
		return false
	case PatternLiteral, PatternPrefixed:
		return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
	return false
}

// Validate reports a filter no binding could be selected by in a meaningful way (Kafka answers
// INVALID_REQUEST): unknown codes.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == ResourceUnknown || f.ResourceType > ResourceUser:
		return errInvalid("resource type", f.ResourceType.String())
	case f.PatternType == PatternUnknown || f.PatternType > PatternPrefixed:
		return errInvalid("pattern type", f.PatternType.String())
	case f.Operation == OperationUnknown || f.Operation > OperationDescribeTokens:
		return errInvalid("operation", f.Operation.String())
	case f.Permission == PermissionUnknown || f.Permission > PermissionAllow:
		return errInvalid("permission", f.Permission.String())
	}
	return nil
}

type invalidError struct{ field, value string }

func (e invalidError) Error() string {
	return "acl: filter " + e.field + " " + e.value + " is not valid"
}

func errInvalid(field, value string) error { return invalidError{field, value} }
