package main

import (
	"flag"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/client"
)

// saslFlags are the global SASL flags; each defaults to its SLUICE_* environment variable.
type saslFlags struct {
	mechanism string
	user      string
	password  string
}

// valueFlags are the global flags that take a value (globalsLast moves them after the command).
var saslValueFlags = []string{"sasl-mechanism", "sasl-user", "sasl-password"}

func registerSASLFlags(fs *flag.FlagSet, s *saslFlags) {
	fs.StringVar(&s.mechanism, "sasl-mechanism", envOr("SLUICE_SASL_MECHANISM", "SCRAM-SHA-512"),
		"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 ($SLUICE_SASL_MECHANISM); used with --sasl-user")
	fs.StringVar(&s.user, "sasl-user", os.Getenv("SLUICE_SASL_USER"), "authenticate with SASL as this user ($SLUICE_SASL_USER)")
	fs.StringVar(&s.password, "sasl-password", os.Getenv("SLUICE_SASL_PASSWORD"), "password of --sasl-user ($SLUICE_SASL_PASSWORD; prefer the variable: flags show in ps)")
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// clientOptions are sluice's client options for the flags.
func (s saslFlags) clientOptions() []client.Option {
	if s.user == "" {
		return nil
	}
	return []client.Option{client.WithSASL(s.mechanism, s.user, s.password)}
}

// kgoOptions are franz-go's options for the flags.
func (s saslFlags) kgoOptions() []kgo.Opt {
	if s.user == "" {
		return nil
	}
	var mechanism sasl.Mechanism
	switch s.mechanism {
	case "PLAIN":
		mechanism = plain.Auth{User: s.user, Pass: s.password}.AsMechanism()
	case "SCRAM-SHA-256":
		mechanism = scram.Auth{User: s.user, Pass: s.password}.AsSha256Mechanism()
	default:
		mechanism = scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism()
	}
	return []kgo.Opt{kgo.SASL(mechanism)}
}
