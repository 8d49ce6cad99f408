package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// globals are the flags every command takes.
type globals struct {
	brokers string
	json    bool
	timeout time.Duration
	// security is TLS (and later SASL) for every connection (security.go).
	security security
	sasl     saslFlags // sasl_flags.go
}

// brokerList is --brokers split, trimmed and without empties.
func (g *globals) brokerList() []string {
	var out []string
	for _, b := range strings.Split(g.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// defaultBrokers is $SLUICE_BROKERS, else the local default.
func defaultBrokers() string {
	if v := strings.TrimSpace(os.Getenv("SLUICE_BROKERS")); v != "" {
		return v
	}
	return "127.0.0.1:9092"
}

// commandFlags is a command's flag set with its help text.
type commandFlags struct {
	*flag.FlagSet
	name        string // "sluice topic create"
	usage       string // the synopsis after the name
	description string
	globals     globals
}

// newFlags returns a flag set for the command, with the global flags registered.
func newFlags(name, usage, description string) *commandFlags {
	fs := &commandFlags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), name: name, usage: usage, description: description}
	fs.SetOutput(io.Discard) // errors are reported in one line by parse, help by printHelp
	fs.StringVar(&fs.globals.brokers, "brokers", defaultBrokers(), "comma-separated `host:port` list of brokers to bootstrap from ($SLUICE_BROKERS)")
	fs.BoolVar(&fs.globals.json, "json", false, "write machine-readable JSON instead of columns")
	fs.DurationVar(&fs.globals.timeout, "timeout", 30*time.Second, "bound on the command's requests to the brokers")
	fs.globals.security.register(fs.FlagSet)
	registerSASLFlags(fs.FlagSet, &fs.globals.sasl)
	return fs
}

func (fs *commandFlags) printHelp(out io.Writer) {
	fmt.Fprintf(out, "Usage: %s %s\n\n%s\n\nFlags:\n", fs.name, fs.usage, strings.TrimSpace(fs.description))
	fs.SetOutput(out)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parse parses args, allowing flags before, between and after positional arguments (so that
// "sluice topic create NAME --partitions 3" works), and checks the count of positional arguments
// is within [minArgs, maxArgs] (maxArgs < 0: no bound). --help prints help and returns errHelpShown.
func (fs *commandFlags) parse(args []string, out io.Writer, minArgs, maxArgs int) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.printHelp(out)
				return nil, errHelpShown
			}
			return nil, usageErrorf(fs.name, "%v (see %s --help)", err, fs.name)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	if len(positional) < minArgs {
		return nil, usageErrorf(fs.name, "missing argument: usage %s %s", fs.name, fs.usage)
	}
	if maxArgs >= 0 && len(positional) > maxArgs {
		return nil, usageErrorf(fs.name, "unexpected argument %q: usage %s %s", positional[maxArgs], fs.name, fs.usage)
	}
	if len(fs.globals.brokerList()) == 0 {
		return nil, usageErrorf(fs.name, "--brokers is empty: give host:port of at least one broker")
	}
	if fs.globals.timeout <= 0 {
		return nil, usageErrorf(fs.name, "--timeout must be positive")
	}
	return positional, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// keyValues parses repeated key=value settings.
func keyValues(flagName string, items []string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range items {
		key, value, ok := strings.Cut(item, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("--%s %q: want key=value", flagName, item)
		}
		out[key] = value
	}
	return out, nil
}
