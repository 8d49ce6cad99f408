package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestSecurityFlags(t *testing.T) {
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("# comment\n\nadmin:pa:ss\r\nbob:\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts, err := parseFlags([]string{"--require-sasl", "--sasl-plain-users", users, "--super-users", "User:admin; User:broker",
		"--connections-max-reauth", "1h", "--sasl-mechanisms", "SCRAM-SHA-512"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	s := opts.broker.Security
	if !s.RequireSASL || !s.AuthorizerEnabled() || s.ConnectionsMaxReauth != time.Hour || !slices.Equal(s.Mechanisms, []string{"SCRAM-SHA-512"}) ||
		!slices.Equal(s.SuperUsers, []string{"User:admin", "User:broker"}) || s.PlainUsers["admin"] != "pa:ss" || s.PlainUsers["bob"] != "" || len(s.PlainUsers) != 2 {
		t.Fatalf("parsed %+v", s)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("no-colon\n"), 0o600)
	for _, args := range [][]string{{"--sasl-plain-users", bad}, {"--sasl-plain-users", filepath.Join(t.TempDir(), "missing")},
		{"--super-users", "admin"}, {"--sasl-mechanisms", "GSSAPI"}, {"--connections-max-reauth", "-1s"},
		{"--inter-broker-sasl-user", "b", "--inter-broker-sasl-mechanism", "MD5"}} {
		if _, err := parseFlags(args, &out); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
