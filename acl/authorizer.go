package acl

import (
	"cmp"
	"slices"
	"strings"
)

// Set is an immutable, indexed collection of bindings.
type Set struct {
	all []Binding // sorted, without duplicates
	// byType holds, per resource type, the literal bindings by name and the prefixed ones by
	// prefix.
	byType map[ResourceType]*typeIndex
}

type typeIndex struct {
	literal  map[string][]Binding
	prefixed map[string][]Binding
}

// NewSet indexes bindings; duplicates collapse into one. bindings is not retained.
func NewSet(bindings []Binding) *Set {
	all := slices.Clone(bindings)
	slices.SortFunc(all, compare)
	all = slices.Compact(all)
	s := &Set{all: all, byType: map[ResourceType]*typeIndex{}}
	for _, b := range all {
		index := s.byType[b.ResourceType]
		if index == nil {
			index = &typeIndex{literal: map[string][]Binding{}, prefixed: map[string][]Binding{}}
			s.byType[b.ResourceType] = index
		}
		if b.PatternType == PatternPrefixed {
			index.prefixed[b.ResourceName] = append(index.prefixed[b.ResourceName], b)
		} else {
			index.literal[b.ResourceName] = append(index.literal[b.ResourceName], b)
		}
	}
	return s
}

// compare orders bindings by every field, so a Set's contents have one order.
func compare(a, b Binding) int {
	return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), strings.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType), strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host), cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

// Bindings returns every binding, sorted; the slice must not be modified.
func (s *Set) Bindings() []Binding {
	if s == nil {
		return nil
	}
	return s.all
}

// Select returns the bindings the filter matches, sorted.
func (s *Set) Select(f Filter) []Binding {
	var out []Binding
	for _, b := range s.Bindings() {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// With returns a Set holding s's bindings and more.
func (s *Set) With(more []Binding) *Set { return NewSet(append(slices.Clone(s.Bindings()), more...)) }

// Without returns a Set without the bindings any filter matches, and those removed, per filter
// (a binding matched by two filters is reported under both, as Kafka does).
func (s *Set) Without(filters []Filter) (*Set, [][]Binding) {
	removed := make([][]Binding, len(filters))
	var kept []Binding
	for _, b := range s.Bindings() {
		matched := false
		for i, f := range filters {
			if f.Matches(b) {
				removed[i] = append(removed[i], b)
				matched = true
			}
		}
		if !matched {
			kept = append(kept, b)
		}
	}
	return NewSet(kept), removed
}

// applying calls fn for every binding that applies to the resource (type, name) by its pattern.
func (s *Set) applying(resourceType ResourceType, name string, fn func(Binding) bool) {
	if s == nil {
		return
	}
	index := s.byType[resourceType]
	if index == nil {
		return
	}
	for _, key := range []string{name, WildcardResource} {
		for _, b := range index.literal[key] {
			if !fn(b) {
				return
			}
		}
		if name == WildcardResource {
			break
		}
	}
	if len(index.prefixed) == 0 {
		return
	}
	for end := 1; end <= len(name); end++ {
		for _, b := range index.prefixed[name[:end]] {
			if !fn(b) {
				return
			}
		}
	}
}

// Authorizer decides requests against a Set.
type Authorizer struct {
	// SuperUsers may do anything ("User:admin").
	SuperUsers map[string]bool
	// AllowEveryoneIfNoACL permits every request on a resource no binding applies to (Kafka's
	// allow.everyone.if.no.acl.found).
	AllowEveryoneIfNoACL bool
}

// Request is one decision's question.
type Request struct {
	Principal    string
	Host         string
	Operation    Operation
	ResourceType ResourceType
	ResourceName string
}

// Authorize decides one request.
func (a *Authorizer) Authorize(s *Set, r Request) bool {
	if a.SuperUsers[r.Principal] {
		return true
	}
	found, allowed, denied := false, false, false
	s.applying(r.ResourceType, r.ResourceName, func(b Binding) bool {
		found = true
		if !appliesTo(b, r.Principal, r.Host) {
			return true
		}
		if b.Permission == PermissionDeny && (b.Operation == r.Operation || b.Operation == OperationAll) {
			denied = true
			return false
		}
		if b.Permission == PermissionAllow && implies(b.Operation, r.Operation) {
			allowed = true
		}
		return true
	})
	switch {
	case denied:
		return false
	case allowed:
		return true
	}
	return !found && a.AllowEveryoneIfNoACL
}

// AuthorizeAny reports whether the principal may perform the operation on some resource of the
// type (Kafka's authorizeByResourceType, used for InitProducerId's "WRITE on any topic"): some
// ALLOW binding grants it on a literal name or prefix that no DENY covers.
func (a *Authorizer) AuthorizeAny(s *Set, principal, host string, operation Operation, resourceType ResourceType) bool {
	if a.SuperUsers[principal] {
		return true
	}
	index := (*typeIndex)(nil)
	if s != nil {
		index = s.byType[resourceType]
	}
	if index == nil {
		return a.AllowEveryoneIfNoACL
	}
	deniedLiteral, deniedPrefixes := map[string]bool{}, []string{}
	var allows []Binding
	for _, b := range s.all {
		if b.ResourceType != resourceType || !appliesTo(b, principal, host) {
			continue
		}
		switch {
		case b.Permission == PermissionDeny && (b.Operation == operation || b.Operation == OperationAll):
			if b.PatternType == PatternPrefixed {
				deniedPrefixes = append(deniedPrefixes, b.ResourceName)
			} else {
				deniedLiteral[b.ResourceName] = true
			}
		case b.Permission == PermissionAllow && implies(b.Operation, operation):
			allows = append(allows, b)
		}
	}
	if deniedLiteral[WildcardResource] {
		return false
	}
	for _, b := range allows {
		covered := slices.ContainsFunc(deniedPrefixes, func(prefix string) bool { return strings.HasPrefix(b.ResourceName, prefix) })
		if !covered && (b.PatternType == PatternPrefixed || !deniedLiteral[b.ResourceName]) {
			return true
		}
	}
	return false
}

func appliesTo(b Binding, principal, host string) bool {
	return (b.Principal == principal || b.Principal == WildcardPrincipal) && (b.Host == host || b.Host == WildcardHost)
}

// implies reports whether holding granted permits requested.
func implies(granted, requested Operation) bool {
	if granted == requested || granted == OperationAll {
		return true
	}
	switch requested {
	case OperationDescribe:
		return granted == OperationRead || granted == OperationWrite || granted == OperationDelete || granted == OperationAlter
	case OperationDescribeConfigs:
		return granted == OperationAlterConfigs
	}
	return false
}
