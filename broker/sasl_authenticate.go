package broker

// SaslAuthenticate v0-v2: one step of the exchange SaslHandshake started. A failed exchange is
// answered SASL_AUTHENTICATION_FAILED with one generic message (never which part was wrong),
// counted (sluice_sasl_authentication_failures_total), logged at a limited rate, and the
// connection is closed after the answer, as on Kafka. A successful one sets the connection's
// principal to "User:<name>" and, with SecurityConfig.ConnectionsMaxReauth, answers the session
// lifetime (v1+): past it the connection serves only re-authentication (session_auth.go).
// Without a handshake first: ILLEGAL_SASL_STATE. A re-authentication must prove the same user.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/netpoll"
	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleSaslAuthenticate(r *request, req *kmsg.SASLAuthenticateRequest) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	s := r.session
	s.auth.mu.Lock()
	if s.auth.state != saslHandshaken {
		s.auth.mu.Unlock()
		resp.ErrorCode = protocol.IllegalSASLState.Code
		message := "SaslAuthenticate without a SaslHandshake first"
		resp.ErrorMessage = &message
		r.failed()
		r.respond(resp)
		return
	}
	answer, done, lifetime, err := b.saslStepLocked(s, req.SASLAuthBytes)
	s.auth.mu.Unlock()
	if err != nil {
		message := genericAuthFailure
		resp.ErrorCode, resp.ErrorMessage = protocol.SASLAuthenticationFailed.Code, &message
		r.failed()
		r.respond(resp)
		s.conn.Close()
		return
	}
	resp.SASLAuthBytes = answer
	if done {
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
	}
	r.respond(resp)
}

// handleRawSASLToken serves one bare token after SaslHandshake v0: the answer goes out as a bare
// frame too. A failure closes the connection without an answer (the v0 protocol has none).
func (b *Broker) handleRawSASLToken(s *session, q queuedRequest) {
	s.auth.mu.Lock()
	answer, _, _, err := b.saslStepLocked(s, q.frame)
	s.auth.mu.Unlock()
	if err != nil {
		q.res.Skip()
		s.conn.Close()
		return
	}
	q.res.Send(netpoll.Chunk{Bytes: answer})
}

// saslStepLocked feeds one token to the session's exchange and, at its end, records the outcome.
// It expects s.auth.mu held.
func (b *Broker) saslStepLocked(s *session, token []byte) (answer []byte, done bool, lifetime time.Duration, err error) {
	answer, done, err = s.auth.exchange.step(token)
	if err == nil && done && s.auth.authenticated && "User:"+s.auth.exchange.user() != s.auth.principal {
		err = errAuthenticationFailed // re-authentication as someone else
	}
	remote := s.conn.RemoteAddr().String()
	if err != nil {
		s.auth.state, s.auth.exchange = saslStart, nil
		b.security.failures.Inc()
		b.security.failureLog.Warn("SASL authentication failed", "remote", remote, "mechanism", s.auth.mechanism, "err", err)
		return nil, false, 0, err
	}
	if !done {
		return answer, false, 0, nil
	}
	b.security.successes.Inc()
	s.auth.principal = "User:" + s.auth.exchange.user()
	s.auth.authenticated = true
	s.auth.state, s.auth.exchange = saslStart, nil
	lifetime = b.config.Security.ConnectionsMaxReauth
	s.auth.expiresAt = time.Time{}
	if lifetime > 0 {
		s.auth.expiresAt = time.Now().Add(lifetime)
	}
	return answer, true, lifetime, nil
}
