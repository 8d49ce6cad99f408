package coordinator

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/scram"
)

func TestSecurityThroughRaftAndSnapshot(t *testing.T) {
	c := openTest(t, testConfig(t.TempDir()))
	ctx := testContext(t)
	binding := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "t", PatternType: acl.PatternLiteral,
		Principal: "User:a", Host: "*", Operation: acl.OperationRead, Permission: acl.PermissionAllow}
	if err := c.CreateACLs(ctx, []acl.Binding{binding, binding}); err != nil {
		t.Fatal(err)
	}
	bad := binding
	bad.Operation = acl.OperationAny
	if err := c.CreateACLs(ctx, []acl.Binding{bad}); !errors.Is(err, errMalformedCommand) {
		t.Fatalf("invalid binding: %v", err)
	}
	if got := c.Security().ACLs.Bindings(); len(got) != 1 || got[0] != binding {
		t.Fatalf("bindings %v", got)
	}
	credential, err := scram.NewCredential(scram.SHA512, "pw", scram.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := c.AlterScramCredentials(ctx, []CredentialUpsert{{User: "a", Credential: credential}},
		[]CredentialDeletion{{User: "nobody", Mechanism: scram.SHA256}})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], ErrCredentialNotFound) {
		t.Fatalf("alter: %v %v", errs, err)
	}
	if stored, ok := c.Security().Credential("a", scram.SHA512); !ok || !stored.Verify("pw") {
		t.Fatal("credential not stored")
	}

	f := c.fsm
	data := snapshotBytes(t, f)
	restored := newFSM(discardPublish, nil)
	if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if s := restored.security.Load(); len(s.ACLs.Bindings()) != 1 || !s.Credentials["a"][scram.SHA512].Verify("pw") {
		t.Fatalf("restored security %+v", s)
	}

	any := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OperationAny, Permission: acl.PermissionAny}
	deleted, err := c.DeleteACLs(ctx, []acl.Filter{any})
	if err != nil || len(deleted) != 1 || len(deleted[0]) != 1 || len(c.Security().ACLs.Bindings()) != 0 {
		t.Fatalf("delete: %v %v, left %v", deleted, err, c.Security().ACLs.Bindings())
	}
	errs, err = c.AlterScramCredentials(ctx, nil, []CredentialDeletion{{User: "a", Mechanism: scram.SHA512}})
	if err != nil || errs[0] != nil || len(c.Security().Credentials) != 0 {
		t.Fatalf("delete credential: %v %v", errs, err)
	}
}
