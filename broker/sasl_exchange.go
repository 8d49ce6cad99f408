package broker

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/scram"
)

// errAuthenticationFailed is every failed exchange's error, whatever was wrong: clients get
// SASL_AUTHENTICATION_FAILED with genericAuthFailure and nothing more.
var errAuthenticationFailed = errors.New("broker: SASL authentication failed")

// genericAuthFailure is the one message a failed authentication answers.
const genericAuthFailure = "Authentication failed: invalid username or password"

// saslExchange is the server side of one SASL exchange.
type saslExchange interface {
	// step takes the client's next token and returns the answer; done reports success. An error
	// ends the exchange as failed.
	step(token []byte) (answer []byte, done bool, err error)
	// user is the authenticated user once done.
	user() string
}

func (b *Broker) newExchange(mechanism string) saslExchange {
	if m, ok := scram.ParseMechanism(mechanism); ok {
		lookup := func(user string) (scram.Credential, bool) { return b.coordinator.Security().Credential(user, m) }
		return &scramExchange{server: scram.NewServer(m, lookup, b.security.secret)}
	}
	return &plainExchange{broker: b}
}

// scramExchange is SCRAM-SHA-256 or SCRAM-SHA-512 (two client messages).
type scramExchange struct {
	server *scram.Server
}

func (e *scramExchange) step(token []byte) ([]byte, bool, error) {
	answer, err := e.server.Step(token)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", errAuthenticationFailed, err)
	}
	return answer, e.server.Done(), nil
}

func (e *scramExchange) user() string { return e.server.User() }

// plainExchange is PLAIN (RFC 4616): one message "authzid NUL authcid NUL password".
type plainExchange struct {
	broker        *Broker
	authenticated string
}

func (e *plainExchange) step(token []byte) ([]byte, bool, error) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return nil, false, fmt.Errorf("%w: malformed PLAIN message", errAuthenticationFailed)
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if authzid != "" && authzid != user {
		return nil, false, fmt.Errorf("%w: authorization id differs from the user", errAuthenticationFailed)
	}
	if !e.broker.verifyPlain(user, password) {
		return nil, false, errAuthenticationFailed
	}
	e.authenticated = user
	return nil, true, nil
}

func (e *plainExchange) user() string { return e.authenticated }

// verifyPlain checks a PLAIN password against the users file, then the user's SCRAM credentials.
// An unknown user costs a PBKDF2 run like a known one, so timing does not tell them apart.
func (b *Broker) verifyPlain(user, password string) bool {
	if want, ok := b.config.Security.PlainUsers[user]; ok {
		return subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
	}
	security := b.coordinator.Security()
	for _, m := range []scram.Mechanism{scram.SHA512, scram.SHA256} {
		if credential, ok := security.Credential(user, m); ok {
			return credential.Verify(password)
		}
	}
	decoy := scram.Credential{Mechanism: scram.SHA512, Salt: b.security.secret, Iterations: scram.MinIterations, StoredKey: b.security.secret}
	decoy.Verify(password)
	return false
}
