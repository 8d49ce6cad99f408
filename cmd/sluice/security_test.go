package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// startSecureSluiced starts a broker requiring SASL with PLAIN user admin (a super user).
func startSecureSluiced(t *testing.T) string {
	t.Helper()
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("admin:admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sluicedBinary, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--raft-listen", "127.0.0.1:0", "--segment-bytes", "16777216", "--require-sasl", "--sasl-plain-users", users, "--super-users", "User:admin")
	return waitForLine(t, cmd, regexp.MustCompile(`msg="broker serving" listen=(\S+)`))
}

// sluiceAs runs the CLI with extra environment (SLUICE_SASL_*, SLUICE_USER_PASSWORD).
func sluiceAs(t *testing.T, brokers string, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(sluiceBinary, args...)
	cmd.Env = append(append(os.Environ(), "SLUICE_BROKERS="+brokers), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// TestUserAndACLCommands: an admin creates a SCRAM user and ACLs with the CLI (flags and
// environment), the user produces and consumes within them and is refused outside, and the ACLs
// and the user are deleted again.
func TestUserAndACLCommands(t *testing.T) {
	brokers := startSecureSluiced(t)
	admin := []string{"SLUICE_SASL_MECHANISM=PLAIN", "SLUICE_SASL_USER=admin", "SLUICE_SASL_PASSWORD=admin-secret"}
	bob := []string{"SLUICE_SASL_USER=bob", "SLUICE_SASL_PASSWORD=bob-secret"} // SCRAM-SHA-512 by default
	must := func(r result, what string) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		return r
	}
	must(sluiceAs(t, brokers, append(admin, "SLUICE_USER_PASSWORD=bob-secret"), "", "user", "create", "bob"), "user create")
	var users []struct {
		User       string         `json:"user"`
		Mechanisms map[string]int `json:"mechanisms"`
	}
	listed := must(sluiceAs(t, brokers, admin, "", "user", "list", "--json"), "user list")
	if err := json.Unmarshal([]byte(listed.stdout), &users); err != nil || len(users) != 1 || users[0].User != "bob" || len(users[0].Mechanisms) != 2 {
		t.Fatalf("user list: %s (%v)", listed.stdout, err)
	}
	must(sluiceAs(t, brokers, admin, "", "topic", "create", "orders.eu"), "topic create")
	must(sluiceAs(t, brokers, admin, "", "topic", "create", "payroll"), "topic create")
	must(sluiceAs(t, brokers, admin, "", "acl", "create", "--principal", "User:bob", "--operation", "write", "--operation", "read",
		"--topic", "orders.", "--prefixed"), "acl create")
	aclList := parseBindings(t, must(sluiceAs(t, brokers, admin, "", "acl", "list", "--principal", "User:bob", "--json"), "acl list"))
	if len(aclList) != 2 || aclList[0]["principal"] != "User:bob" || aclList[0]["pattern_type"] != "prefixed" {
		t.Fatalf("acl list: %v", aclList)
	}
	match := must(sluiceAs(t, brokers, admin, "", "acl", "list", "--topic", "orders.eu", "--match"), "acl list --match")
	if !strings.Contains(match.stdout, "orders.") {
		t.Fatalf("acl list --match orders.eu does not show the prefix ACL:\n%s", match.stdout)
	}

	must(sluiceAs(t, brokers, bob, "a\nb\n", "produce", "orders.eu"), "produce as bob")
	consumed := must(sluiceAs(t, brokers, bob, "", "consume", "orders.eu", "--from-beginning", "--count", "2"), "consume as bob")
	if consumed.stdout != "a\nb\n" {
		t.Fatalf("bob consumed %q", consumed.stdout)
	}
	if r := sluiceAs(t, brokers, bob, "x\n", "produce", "payroll"); r.code == 0 || !strings.Contains(r.stderr, "AUTHORIZATION_FAILED") {
		t.Fatalf("produce to payroll as bob: exit %d, stderr %q", r.code, r.stderr)
	}
	wrong := []string{"SLUICE_SASL_USER=bob", "SLUICE_SASL_PASSWORD=nope"}
	failsInOneLine(t, "wrong password", sluiceAs(t, brokers, wrong, "", "topic", "list"), 1, "SASL_AUTHENTICATION_FAILED")
	// Flags work as the environment does.
	must(sluiceAs(t, brokers, nil, "", "topic", "list", "--sasl-user", "bob", "--sasl-password", "bob-secret"), "flags")

	if deleted := parseBindings(t, must(sluiceAs(t, brokers, admin, "", "acl", "delete", "--principal", "User:bob", "--json"), "acl delete")); len(deleted) != 2 {
		t.Fatalf("acl delete reported %v", deleted)
	}
	must(sluiceAs(t, brokers, admin, "", "user", "delete", "bob"), "user delete")
	failsInOneLine(t, "deleted user", sluiceAs(t, brokers, bob, "", "topic", "list"), 1, "SASL_AUTHENTICATION_FAILED")
	failsInOneLine(t, "user list of a deleted user", sluiceAs(t, brokers, admin, "", "user", "list", "bob"), 3, "no SCRAM credentials")
}

func parseBindings(t *testing.T, r result) []map[string]string {
	t.Helper()
	var rows []map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	return rows
}
