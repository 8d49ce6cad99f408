package broker

import (
	"crypto/rand"
	"net"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/loglimit"
)

// anonymousPrincipal is the principal of connections that did not authenticate.
const anonymousPrincipal = "User:ANONYMOUS"

// security is the broker's authentication and authorization machinery. The ACLs and SCRAM
// credentials themselves live in the replicated metadata (coordinator.Security), read at each
// decision.
type security struct {
	enabled    bool // the authorizer is on
	authorizer acl.Authorizer
	mechanisms []string
	// secret keys the made-up SCRAM salts of unknown users (stable for the process's life).
	secret []byte
	// failureLog rate-limits the failed-authentication warning: anyone can cause it at will.
	failureLog *loglimit.Limiter
	failures   *metrics.Counter
	successes  *metrics.Counter
	// refusals counts requests refused by the authorizer.
	refusals *metrics.Counter
}

func (b *Broker) newSecurity() *security {
	cfg := b.config.Security
	s := &security{
		enabled:    b.config.authorizerEnabled(),
		mechanisms: cfg.EnabledMechanisms(),
		secret:     make([]byte, 32),
		failureLog: loglimit.New(b.logger, loglimit.DefaultInterval, loglimit.DefaultBurst),
		failures:   b.metrics.set.NewCounter("sluice_sasl_authentication_failures_total"),
		successes:  b.metrics.set.NewCounter("sluice_sasl_authentications_total"),
		refusals:   b.metrics.set.NewCounter("sluice_authorization_refusals_total"),
	}
	rand.Read(s.secret)
	s.authorizer.SuperUsers = map[string]bool{}
	for _, user := range cfg.SuperUsers {
		s.authorizer.SuperUsers[strings.TrimSpace(user)] = true
	}
	s.authorizer.AllowEveryoneIfNoACL = cfg.AllowEveryoneIfNoACL
	return s
}

// hostOf is the host an ACL names a client by: its IP address.
func hostOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}
