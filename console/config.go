package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

// Config configures a Console. Start from DefaultConfig.
type Config struct {
	// Brokers are the Kafka addresses (host:port) the console dials: sluiced passes its own
	// listener.
	Brokers []string
	// Writes serves the forms that change the cluster (create and delete topics, reset offsets,
	// delete groups). Off, every POST is refused with 403 and the pages show no forms.
	Writes bool
	// Authorize, when set, is asked before every write; an error refuses it with 403 and the
	// error's text: a policy on top of the broker's own ACL checks (package doc, Login).
	Authorize func(r *http.Request, action Action) error
	// SampleInterval is how often the sampler records log end offsets and group offsets for the
	// charts, and how often open pages refresh their live parts.
	SampleInterval time.Duration
	// SampleHistory is how many samples the ring keeps (the charts' time span is
	// SampleInterval * SampleHistory).
	SampleHistory int
	// MaxSampledTopics and MaxSampledGroups bound the sampler's memory.
	MaxSampledTopics int
	MaxSampledGroups int
	// RequestTimeout bounds the Kafka requests of one page or one sample.
	RequestTimeout time.Duration
	// Logger receives the sampler's failures; nil: slog.Default().
	Logger *slog.Logger
	// FranzOptions and ClientOptions are added to the options of the console's two Kafka
	// clients (franz-go and sluice's): where the listener needs TLS or SASL, they carry it.
	FranzOptions  []kgo.Opt
	ClientOptions []client.Option

	// SASLMechanism, when set (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), says the listener needs
	// SASL: every page but the login form needs a session, and each session's Kafka clients
	// authenticate as its user with this mechanism, so the broker's ACLs decide what the user
	// sees and may change. Empty: no login, one set of shared clients.
	SASLMechanism string
	// SamplerUser and SamplerPassword are the principal the charts' sampler acts as when
	// SASLMechanism is set; empty: no sampler, and the charts stay empty. Pages show only the
	// sampled topics the logged-in user may describe.
	SamplerUser, SamplerPassword string
	// SessionIdleTimeout and SessionMaxAge end a session unused this long, or this old.
	SessionIdleTimeout, SessionMaxAge time.Duration
	// MaxSessions bounds the sessions (each holds Kafka connections); a login past it ends the
	// least recently used session.
	MaxSessions int
}

// Action is a write the console is about to make, for Config.Authorize.
type Action struct {
	Operation string // "create-topic", "delete-topic", "reset-offsets", "delete-group"
	Resource  string // the topic or group name
}

// DefaultConfig returns the defaults: read-only, a sample every 2 s, 5 minutes of history.
func DefaultConfig() Config {
	return Config{
		SampleInterval:   2 * time.Second,
		SampleHistory:    150,
		MaxSampledTopics: 500,
		MaxSampledGroups: 200,
		RequestTimeout:   10 * time.Second,

		SessionIdleTimeout: 30 * time.Minute,
		SessionMaxAge:      12 * time.Hour,
		MaxSessions:        100,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("console: no broker address")
	case c.SampleInterval < 100*time.Millisecond:
		return errors.New("console: sample interval below 100ms")
	case c.SampleHistory < 2:
		return errors.New("console: sample history below 2")
	case c.MaxSampledTopics < 1 || c.MaxSampledGroups < 1:
		return errors.New("console: sampled topic and group caps must be positive")
	case c.RequestTimeout <= 0:
		return errors.New("console: request timeout must be positive")
	case c.SASLMechanism != "" && c.SASLMechanism != client.SASLPlain && c.SASLMechanism != client.SASLScramSHA256 && c.SASLMechanism != client.SASLScramSHA512:
		return fmt.Errorf("console: SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
	case c.SASLMechanism != "" && (c.SessionIdleTimeout <= 0 || c.SessionMaxAge <= 0 || c.MaxSessions < 1):
		return errors.New("console: session timeouts and the session cap must be positive")
	case c.SASLMechanism == "" && c.SamplerUser != "":
		return errors.New("console: a sampler user needs a SASL mechanism")
	}
	return nil
}
