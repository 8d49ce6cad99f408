package broker

import (
	"sync"
	"time"

	"github.com/sluice-mq/sluice/protocol"
)

// saslState is where a connection stands in SASL authentication.
type saslState int

const (
	// saslStart: no handshake yet (or the last exchange finished).
	saslStart saslState = iota
	// saslHandshaken: SaslHandshake v1 chose a mechanism; SaslAuthenticate requests carry the
	// tokens.
	saslHandshaken
	// saslRawTokens: SaslHandshake v0 chose a mechanism; the next frames are bare SASL tokens
	// without a Kafka request header, until the exchange ends.
	saslRawTokens
)

// sessionAuth is a connection's authentication state. Requests of one connection are handled one
// at a time, but the state is also read when deciding requests, so it sits under a mutex.
type sessionAuth struct {
	mu sync.Mutex
	// needSASL: the connection must authenticate before other requests (SASL listener).
	needSASL bool
	state    saslState
	// mechanism is the mechanism of the first successful authentication; re-authentication must
	// use the same one.
	mechanism string
	exchange  saslExchange
	// authenticated is set once an exchange succeeded; it stays set across re-authentications.
	authenticated bool
	// principal is who the connection acts as: "User:name" after SASL, the TLS principal, or
	// anonymousPrincipal.
	principal string
	// expiresAt is when the SASL session ends (zero: never); past it, only re-authentication is
	// served (KIP-368).
	expiresAt time.Time
}

func (b *Broker) initSessionAuth(s *session) {
	needSASL, tlsPrincipal := b.connectionSecurity(s.conn)
	s.auth.needSASL = needSASL
	s.auth.principal = anonymousPrincipal
	if tlsPrincipal != "" {
		s.auth.principal = tlsPrincipal
	}
}

// principal is who the session acts as.
func (s *session) principal() string {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return s.auth.principal
}

// rawSASLToken reports whether the next frame is a bare SASL token (after SaslHandshake v0).
func (s *session) rawSASLToken() bool {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return s.auth.state == saslRawTokens
}

// admitAuthenticated decides whether r may be served on its connection's authentication state:
// on a SASL connection, before authentication (or after the session expired) only ApiVersions,
// SaslHandshake and SaslAuthenticate are; anything else closes the connection, as on Kafka.
func (b *Broker) admitAuthenticated(r *request) bool {
	s := r.session
	s.auth.mu.Lock()
	needSASL, authenticated, expiresAt := s.auth.needSASL, s.auth.authenticated, s.auth.expiresAt
	s.auth.mu.Unlock()
	if !needSASL {
		return true
	}
	switch r.header.APIKey {
	case protocol.ApiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		return true
	}
	if !authenticated {
		b.closeFor(r, "request before SASL authentication")
		return false
	}
	if !expiresAt.IsZero() && time.Now().After(expiresAt) {
		b.closeFor(r, "SASL session expired without re-authentication")
		return false
	}
	return true
}

const (
	saslHandshakeKey    int16 = 17
	saslAuthenticateKey int16 = 36
)
