package broker

// SaslHandshake v0-v1: the client names a SASL mechanism. An enabled one is remembered for the
// exchange; others get UNSUPPORTED_SASL_MECHANISM with the enabled list. After v0 the tokens
// follow as bare frames (no Kafka header); after v1 in SaslAuthenticate requests. On a connection
// that does not use SASL, or in the middle of an exchange, ILLEGAL_SASL_STATE. A handshake on an
// authenticated connection starts a re-authentication (KIP-368, v1 only), which must use the
// mechanism of the first authentication.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleSaslHandshake(r *request, req *kmsg.SASLHandshakeRequest) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = b.security.mechanisms
	s := r.session
	s.auth.mu.Lock()
	code := protocol.None
	switch {
	case !s.auth.needSASL || s.auth.state != saslStart:
		code = protocol.IllegalSASLState
	case !slices.Contains(b.security.mechanisms, req.Mechanism):
		code = protocol.UnsupportedSASLMechanism
	case s.auth.authenticated && (req.Version == 0 || req.Mechanism != s.auth.mechanism):
		code = protocol.IllegalSASLState
	default:
		s.auth.exchange = b.newExchange(req.Mechanism)
		s.auth.state = saslHandshaken
		if req.Version == 0 {
			s.auth.state = saslRawTokens
		}
		if !s.auth.authenticated {
			s.auth.mechanism = req.Mechanism
		}
	}
	s.auth.mu.Unlock()
	resp.ErrorCode = code.Code
	if code != protocol.None {
		r.failed()
	}
	r.respond(resp)
}
