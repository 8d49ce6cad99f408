package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/scram"
)

// SASL mechanism names served.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// SecurityConfig configures authentication (SASL) and authorization (ACLs).
//
// The authorizer is on when Authorizer is set or when SASL is required: a broker that
// authenticates its clients checks what they may do. Connections that did not authenticate act as
// "User:ANONYMOUS", as on Kafka. With the authorizer off every request is allowed and the ACL APIs
// answer SECURITY_DISABLED.
type SecurityConfig struct {
	// RequireSASL makes every connection authenticate with SASL before any request other than
	// ApiVersions, SaslHandshake and SaslAuthenticate (Kafka's SASL_PLAINTEXT listener). It is the
	// listener's security protocol until listeners carry their own (auth_conn.go).
	RequireSASL bool
	// Mechanisms are the enabled SASL mechanisms; empty means all of PLAIN, SCRAM-SHA-256 and
	// SCRAM-SHA-512.
	Mechanisms []string
	// PlainUsers are PLAIN users and their passwords (--sasl-plain-users). PLAIN also accepts the
	// SCRAM users of the metadata, checked against their salted credentials.
	PlainUsers map[string]string
	// ConnectionsMaxReauth is the longest a SASL session lasts before the client must
	// re-authenticate (KIP-368, connections.max.reauth.ms); 0: sessions never expire.
	ConnectionsMaxReauth time.Duration

	// Authorizer turns ACL checks on without SASL.
	Authorizer bool
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers []string
	// AllowEveryoneIfNoACL allows requests on resources no ACL applies to
	// (allow.everyone.if.no.acl.found); off by default.
	AllowEveryoneIfNoACL bool

	// InterBrokerMechanism, InterBrokerUser and InterBrokerPassword are what this broker presents
	// when it connects to other brokers' SASL listeners (follower fetches, transaction markers). The
	// user must be a super user or hold CLUSTER_ACTION on the cluster (and WRITE on topics for
	// markers' produce path).
	InterBrokerMechanism string
	InterBrokerUser      string
	InterBrokerPassword  string
}

// AuthorizerEnabled reports whether requests are checked against ACLs.
func (c SecurityConfig) AuthorizerEnabled() bool { return c.Authorizer || c.RequireSASL }

// EnabledMechanisms returns the mechanisms served, in a stable order.
func (c SecurityConfig) EnabledMechanisms() []string {
	if len(c.Mechanisms) == 0 {
		return []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512}
	}
	return c.Mechanisms
}

// Validate reports unusable settings.
func (c SecurityConfig) Validate() error {
	var errs []error
	for _, m := range c.Mechanisms {
		if _, ok := scram.ParseMechanism(m); !ok && m != MechanismPlain {
			errs = append(errs, fmt.Errorf("SASL mechanism %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", m))
		}
	}
	for _, user := range c.SuperUsers {
		if kind, name, ok := strings.Cut(user, ":"); !ok || kind == "" || name == "" {
			errs = append(errs, fmt.Errorf("super user %q is not Type:name (User:admin)", user))
		}
	}
	if c.ConnectionsMaxReauth < 0 {
		errs = append(errs, fmt.Errorf("connections max reauth %v is negative", c.ConnectionsMaxReauth))
	}
	if c.InterBrokerUser != "" && !slices.Contains([]string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512}, c.InterBrokerMechanism) {
		errs = append(errs, fmt.Errorf("inter-broker SASL mechanism %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", c.InterBrokerMechanism))
	}
	return errors.Join(errs...)
}
