package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/scram"
)

// SASL mechanisms WithSASL accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// ErrAuthentication: the broker refused the SASL credentials (SASL_AUTHENTICATION_FAILED), or the
// broker's SCRAM signature did not verify.
var ErrAuthentication = errors.New("client: SASL authentication failed")

// saslConfig is what WithSASL sets.
type saslConfig struct {
	mechanism string
	user      string
	password  string
}

// WithSASL authenticates every connection with SASL (SaslHandshake v1, then SaslAuthenticate):
// mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. Default: no SASL. Connections are not
// re-authenticated (KIP-368): a broker that limits session lifetimes closes them when they are
// next used after it, and the client dials again.
func WithSASL(mechanism, user, password string) Option {
	return func(c *clientConfig) { c.sasl = &saslConfig{mechanism: mechanism, user: user, password: password} }
}

// authenticate runs the SASL exchange on a freshly negotiated connection.
func (c *brokerConn) authenticate(ctx context.Context, cfg *saslConfig) error {
	if cfg == nil {
		return nil
	}
	if !c.supports(17) || !c.supports(36) {
		return fmt.Errorf("%w: %s does not serve SaslHandshake v1 and SaslAuthenticate", ErrUnsupported, c.address)
	}
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Mechanism = cfg.mechanism
	raw, err := c.roundTrip(ctx, handshake)
	if err != nil {
		return err
	}
	if resp := raw.(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		return fmt.Errorf("%w: mechanism %s (broker offers %v): %w", ErrAuthentication, cfg.mechanism, resp.SupportedMechanisms,
			newKafkaError("sasl handshake", "", -1, resp.ErrorCode, nil))
	}
	step := func(token []byte) ([]byte, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = token
		raw, err := c.roundTrip(ctx, req)
		if err != nil {
			return nil, err
		}
		resp := raw.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return nil, fmt.Errorf("%w: %w", ErrAuthentication, newKafkaError("sasl authenticate", "", -1, resp.ErrorCode, resp.ErrorMessage))
		}
		return resp.SASLAuthBytes, nil
	}
	if cfg.mechanism == SASLPlain {
		_, err := step([]byte("\x00" + cfg.user + "\x00" + cfg.password))
		return err
	}
	m, ok := scram.ParseMechanism(cfg.mechanism)
	if !ok {
		return fmt.Errorf("%w: unknown SASL mechanism %q", ErrAuthentication, cfg.mechanism)
	}
	exchange := scram.NewClient(m, cfg.user, cfg.password)
	serverFirst, err := step(exchange.First())
	if err != nil {
		return err
	}
	clientFinal, err := exchange.Final(serverFirst)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	serverFinal, err := step(clientFinal)
	if err != nil {
		return err
	}
	if err := exchange.Verify(serverFinal); err != nil {
		return fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	return nil
}
