package acl

import "testing"

func allow(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	b := allow(rt, name, pt, principal, op)
	b.Permission = PermissionDeny
	return b
}

func TestAuthorizeLiteralPrefixedDenyAndSuperUsers(t *testing.T) {
	set := NewSet([]Binding{
		allow(ResourceTopic, "orders", PatternLiteral, "User:alice", OperationWrite),
		allow(ResourceTopic, "logs.", PatternPrefixed, "User:alice", OperationRead),
		deny(ResourceTopic, "logs.secret", PatternLiteral, "User:alice", OperationRead),
		allow(ResourceTopic, "*", PatternLiteral, "User:*", OperationDescribe),
		allow(ResourceGroup, "g", PatternLiteral, "User:bob", OperationAll),
		deny(ResourceGroup, "g", PatternLiteral, "User:*", OperationDelete),
		{ResourceType: ResourceTopic, ResourceName: "hosty", PatternType: PatternLiteral, Principal: "User:alice", Host: "10.0.0.1", Operation: OperationRead, Permission: PermissionAllow},
	})
	a := &Authorizer{SuperUsers: map[string]bool{"User:admin": true}}
	check := func(principal string, op Operation, rt ResourceType, name string, want bool) {
		t.Helper()
		if got := a.Authorize(set, Request{Principal: principal, Host: "127.0.0.1", Operation: op, ResourceType: rt, ResourceName: name}); got != want {
			t.Errorf("%s %s %s %q: got %v, want %v", principal, op, rt, name, got, want)
		}
	}
	check("User:alice", OperationWrite, ResourceTopic, "orders", true)
	check("User:alice", OperationWrite, ResourceTopic, "orders2", false) // literal is not a prefix
	check("User:alice", OperationRead, ResourceTopic, "orders", false)
	check("User:alice", OperationDescribe, ResourceTopic, "orders", true) // WRITE implies DESCRIBE
	check("User:alice", OperationRead, ResourceTopic, "logs.app", true)   // prefixed
	check("User:alice", OperationRead, ResourceTopic, "logs", false)
	check("User:alice", OperationRead, ResourceTopic, "logs.secret", false) // deny over allow
	check("User:alice", OperationDescribe, ResourceTopic, "logs.secret", true)
	check("User:carol", OperationDescribe, ResourceTopic, "anything", true) // wildcard name and principal
	check("User:carol", OperationRead, ResourceTopic, "anything", false)
	check("User:bob", OperationRead, ResourceGroup, "g", true) // ALL
	check("User:bob", OperationDelete, ResourceGroup, "g", false)
	check("User:alice", OperationRead, ResourceTopic, "hosty", false) // host does not match
	check("User:admin", OperationDelete, ResourceGroup, "g", true)    // super user over deny
	check("User:admin", OperationAlter, ResourceCluster, ClusterName, true)
	check("User:alice", OperationAlter, ResourceCluster, ClusterName, false) // no binding, default deny

	a.AllowEveryoneIfNoACL = true
	check("User:alice", OperationAlter, ResourceCluster, ClusterName, true)
	check("User:alice", OperationRead, ResourceTopic, "orders", false) // bindings exist on it
}

func TestAuthorizeAny(t *testing.T) {
	a := &Authorizer{}
	set := NewSet([]Binding{
		allow(ResourceTopic, "a.", PatternPrefixed, "User:alice", OperationWrite),
		deny(ResourceTopic, "a", PatternPrefixed, "User:bob", OperationWrite),
		allow(ResourceTopic, "a.x", PatternLiteral, "User:bob", OperationWrite),
		allow(ResourceTopic, "t", PatternLiteral, "User:carol", OperationWrite),
		deny(ResourceTopic, "*", PatternLiteral, "User:carol", OperationWrite),
	})
	for principal, want := range map[string]bool{"User:alice": true, "User:bob": false, "User:carol": false, "User:dave": false} {
		if got := a.AuthorizeAny(set, principal, "h", OperationWrite, ResourceTopic); got != want {
			t.Errorf("%s: got %v, want %v", principal, got, want)
		}
	}
}

func TestFilters(t *testing.T) {
	set := NewSet([]Binding{
		allow(ResourceTopic, "orders", PatternLiteral, "User:alice", OperationWrite),
		allow(ResourceTopic, "ord", PatternPrefixed, "User:alice", OperationRead),
		allow(ResourceTopic, "*", PatternLiteral, "User:bob", OperationRead),
		allow(ResourceGroup, "orders", PatternLiteral, "User:alice", OperationRead),
		allow(ResourceTopic, "orders", PatternLiteral, "User:alice", OperationWrite), // duplicate
	})
	name := func(s string) *string { return &s }
	count := func(f Filter, want int) {
		t.Helper()
		if got := len(set.Select(f)); got != want {
			t.Errorf("%+v: %d bindings, want %d", f, got, want)
		}
	}
	any := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OperationAny, Permission: PermissionAny}
	count(any, 4)
	f := any
	f.ResourceType, f.ResourceName, f.PatternType = ResourceTopic, name("orders"), PatternMatch
	count(f, 3) // literal, prefix "ord", wildcard
	f.PatternType = PatternLiteral
	count(f, 1)
	f.PatternType = PatternPrefixed
	count(f, 0)
	f.PatternType, f.ResourceName = PatternAny, name("orders")
	count(f, 1)
	f = any
	f.Principal = name("User:alice")
	count(f, 3)
	kept, removed := set.Without([]Filter{f, {ResourceType: ResourceGroup, PatternType: PatternAny, Operation: OperationAny, Permission: PermissionAny}})
	if len(kept.Bindings()) != 1 || len(removed[0]) != 3 || len(removed[1]) != 1 {
		t.Fatalf("Without: kept %v removed %v", kept.Bindings(), removed)
	}
}

func TestValidate(t *testing.T) {
	good := allow(ResourceTopic, "t", PatternLiteral, "User:a", OperationRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mutate := range []func(*Binding){
		func(b *Binding) { b.ResourceType = ResourceAny },
		func(b *Binding) { b.PatternType = PatternMatch },
		func(b *Binding) { b.Operation = OperationAny },
		func(b *Binding) { b.Permission = PermissionAny },
		func(b *Binding) { b.Principal = "alice" },
		func(b *Binding) { b.ResourceType, b.ResourceName = ResourceCluster, "x" },
	} {
		b := good
		mutate(&b)
		if b.Validate() == nil {
			t.Errorf("%+v accepted", b)
		}
	}
}
