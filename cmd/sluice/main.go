// Command sluice is the command line for people who run sluice, or any Kafka-protocol broker:
// topics, producing and consuming, consumer groups, cluster status, and the load harness.
//
//	sluice topic create orders --partitions 3
//	seq 1 10 | sluice produce orders
//	sluice consume orders --from-beginning --count 10
//	sluice group describe billing
//	sluice txn list
//	sluice bench --workload bench/workloads/1-topic-8-partitions-100b.yaml --duration 20s
//
// Exit codes: 0 success, 1 the operation failed (broker unreachable, refused, timed out), 2 the
// command line is wrong, 3 the named topic or group does not exist. Errors are one line on stderr
// saying what went wrong and what to do.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// Exit codes scripts can rely on.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// streams are the process's standard files, passed down so that commands never reach for globals.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

const topUsage = `Usage: sluice <command> [arguments] [flags]

sluice talks to sluiced, or to any broker that speaks the Kafka protocol.

Commands:
  topic create|list|describe|delete|alter   manage topics
  produce TOPIC                             write lines from stdin (or --file) as records
  consume TOPIC                             read records to stdout (plain, key/value or JSON lines)
  group list|describe|reset-offsets|delete  consumer groups: members, committed offsets, lag
  cluster status                            brokers, controller, partitions and their leaders
  txn list|describe                         transactional ids: state, producer, open partitions
  acl create|list|delete                    ACLs: who may do what on topics, groups, the cluster
  user create|delete|list                   SCRAM users (credentials salted, kept in the metadata)
  bench [run]|agent                         the load harness: run a workload file, or serve as an agent

Every command takes:
  --brokers host:port,...   brokers to bootstrap from (default $SLUICE_BROKERS, else 127.0.0.1:9092)
  --json                    machine-readable output
  --timeout duration        bound on the command's requests (default 30s)
  --sasl-user, --sasl-password, --sasl-mechanism
                            authenticate with SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; default
                            SCRAM-SHA-512); also $SLUICE_SASL_USER, _PASSWORD, _MECHANISM

Exit codes: 0 success; 1 the operation failed; 2 bad command line; 3 topic or group not found.
Run "sluice <command> --help" for a command's arguments and flags.
`

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	io := streams{in: stdin, out: stdout, err: stderr}
	err := dispatch(ctx, args, io)
	code, message := classify(err)
	if message != "" {
		fmt.Fprintln(stderr, message)
	}
	return code
}

// errHelpShown ends a command whose help was asked for and printed.
var errHelpShown = errors.New("help shown")

func dispatch(ctx context.Context, args []string, io streams) error {
	if len(args) == 0 {
		fmt.Fprint(io.err, topUsage)
		return usageErrorf("sluice", "no command given")
	}
	args = globalsLast(args)
	command, rest := args[0], args[1:]
	switch command {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(io.out, topUsage)
		return nil
	case "topic", "topics":
		return runTopic(ctx, rest, io)
	case "produce":
		return runProduce(ctx, rest, io)
	case "consume":
		return runConsume(ctx, rest, io)
	case "group", "groups":
		return runGroup(ctx, rest, io)
	case "cluster":
		return runCluster(ctx, rest, io)
	case "txn", "transactions":
		return runTxn(ctx, rest, io)
	case "bench":
		return runBench(ctx, rest, io)
	case "acl", "acls":
		return runACL(ctx, rest, io)
	case "user", "users":
		return runUser(ctx, rest, io)
	}
	return usageErrorf("sluice", "unknown command %q (commands: topic, produce, consume, group, cluster, txn, acl, user, bench; see sluice --help)", command)
}

// subcommand picks the verb of a noun command ("topic create") from args.
func subcommand(noun string, args []string, verbs []string, io streams, help string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, usageErrorf("sluice "+noun, "missing subcommand (one of %s; see sluice %s --help)", strings.Join(verbs, ", "), noun)
	}
	verb := args[0]
	if verb == "-h" || verb == "-help" || verb == "--help" || verb == "help" {
		fmt.Fprint(io.out, help)
		return "", nil, errHelpShown
	}
	for _, v := range verbs {
		if v == verb {
			return verb, args[1:], nil
		}
	}
	return "", nil, usageErrorf("sluice "+noun, "unknown subcommand %q (one of %s)", verb, strings.Join(verbs, ", "))
}

// globalsLast moves global flags given before the command ("sluice --brokers b:9092 topic list")
// behind it, where the command's flag set parses them.
func globalsLast(args []string) []string {
	var globalFlags []string
	for len(args) > 0 {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !strings.HasPrefix(args[0], "-") {
			break
		}
		switch {
		case name == "json":
			globalFlags, args = append(globalFlags, args[0]), args[1:]
		case (name == "brokers" || name == "timeout" || slices.Contains(saslValueFlags, name)) && hasValue:
			globalFlags, args = append(globalFlags, args[0]), args[1:]
		case (name == "brokers" || name == "timeout" || slices.Contains(saslValueFlags, name)) && len(args) > 1:
			globalFlags, args = append(globalFlags, args[0], args[1]), args[2:]
		default:
			return append(args, globalFlags...) // not a global flag: let the dispatcher report it
		}
	}
	if len(args) == 0 {
		return globalFlags
	}
	return append(append([]string{args[0]}, args[1:]...), globalFlags...)
}
