package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/scram"
)

const userHelp = `Usage: sluice user <create|delete|list> [arguments] [flags]

SCRAM users (SASL/SCRAM-SHA-256 and SCRAM-SHA-512; SASL/PLAIN accepts them too). Passwords are
salted here: the brokers keep only the salt, iteration count and derived keys.

  SLUICE_USER_PASSWORD=secret sluice user create alice [--mechanism SCRAM-SHA-256]
  sluice user list
  sluice user delete alice [--mechanism SCRAM-SHA-512]

Run "sluice user <subcommand> --help" for its flags.
`

func runUser(ctx context.Context, args []string, io streams) error {
	verb, rest, err := subcommand("user", args, []string{"create", "delete", "list"}, io, userHelp)
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		return userCreate(ctx, rest, io)
	case "delete":
		return userDelete(ctx, rest, io)
	}
	return userList(ctx, rest, io)
}

func parseMechanisms(command string, names []string) ([]scram.Mechanism, error) {
	var out []scram.Mechanism
	for _, name := range names {
		m, ok := scram.ParseMechanism(strings.ToUpper(name))
		if !ok {
			return nil, usageErrorf(command, "--mechanism %q is not SCRAM-SHA-256 or SCRAM-SHA-512", name)
		}
		out = append(out, m)
	}
	return out, nil
}

func userCreate(ctx context.Context, args []string, io streams) error {
	const command = "sluice user create"
	fs := newFlags(command, "NAME [flags]", "Create a SCRAM user or set its password (AlterUserScramCredentials).")
	var mechanisms stringList
	var password string
	var iterations int
	fs.Var(&mechanisms, "mechanism", "SCRAM-SHA-256 or SCRAM-SHA-512 (default both); repeatable")
	fs.StringVar(&password, "password", os.Getenv("SLUICE_USER_PASSWORD"), "the user's password ($SLUICE_USER_PASSWORD; prefer the variable: flags show in ps)")
	fs.IntVar(&iterations, "iterations", scram.MinIterations, "PBKDF2 iterations (4096-16384)")
	names, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	if password == "" {
		return usageErrorf(command, "no password: set SLUICE_USER_PASSWORD or --password")
	}
	if len(mechanisms) == 0 {
		mechanisms = stringList{"SCRAM-SHA-256", "SCRAM-SHA-512"}
	}
	ms, err := parseMechanisms(command, mechanisms)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	for _, m := range ms {
		if err := s.admin().UpsertScramUser(rctx, m, names[0], password, iterations); err != nil {
			return err
		}
	}
	return printUsers(io, fs.globals.json, []client.ScramUser{{User: names[0], Mechanisms: iterationsOf(ms, iterations)}})
}

func iterationsOf(ms []scram.Mechanism, iterations int) map[scram.Mechanism]int {
	out := map[scram.Mechanism]int{}
	for _, m := range ms {
		out[m] = iterations
	}
	return out
}

func userDelete(ctx context.Context, args []string, io streams) error {
	const command = "sluice user delete"
	fs := newFlags(command, "NAME [flags]", "Delete a SCRAM user's credentials (AlterUserScramCredentials).")
	var mechanisms stringList
	fs.Var(&mechanisms, "mechanism", "delete only this mechanism's credential (default: every one the user has); repeatable")
	names, err := fs.parse(args, io.out, 1, 1)
	if err != nil {
		return err
	}
	ms, err := parseMechanisms(command, mechanisms)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	if len(ms) == 0 {
		users, err := s.admin().DescribeScramUsers(rctx, names[0])
		if err != nil {
			return userError(names[0], err)
		}
		for _, u := range users {
			for m := range u.Mechanisms {
				ms = append(ms, m)
			}
		}
		slices.Sort(ms)
	}
	for _, m := range ms {
		if err := s.admin().DeleteScramUser(rctx, m, names[0]); err != nil {
			return userError(names[0], err)
		}
	}
	return nil
}

func userError(user string, err error) error {
	var kafkaErr *client.KafkaError
	if errors.As(err, &kafkaErr) && kafkaErr.Code == protocol.ResourceNotFound.Code {
		return &notFoundError{"user " + user + " has no SCRAM credentials (see sluice user list)"}
	}
	return err
}

func userList(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice user list", "[NAME...] [flags]", "List SCRAM users and their mechanisms (DescribeUserScramCredentials).")
	names, err := fs.parse(args, io.out, 0, -1)
	if err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	users, err := s.admin().DescribeScramUsers(rctx, names...)
	if err != nil {
		if len(names) == 1 {
			return userError(names[0], err)
		}
		return err
	}
	return printUsers(io, fs.globals.json, users)
}

type userRow struct {
	User       string         `json:"user"`
	Mechanisms map[string]int `json:"mechanisms"`
}

func printUsers(io streams, asJSON bool, users []client.ScramUser) error {
	rows := []userRow{}
	for _, u := range users {
		row := userRow{User: u.User, Mechanisms: map[string]int{}}
		for m, iterations := range u.Mechanisms {
			row.Mechanisms[m.String()] = iterations
		}
		rows = append(rows, row)
	}
	if asJSON {
		return writeJSON(io.out, rows)
	}
	t := newTable(io.out, "user", "mechanisms")
	for _, r := range rows {
		var parts []string
		for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			if iterations, ok := r.Mechanisms[m]; ok {
				parts = append(parts, m+" ("+strconv.Itoa(iterations)+")")
			}
		}
		t.row(r.User, strings.Join(parts, ", "))
	}
	return t.flush()
}
