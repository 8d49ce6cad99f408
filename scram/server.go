package scram

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrAuthentication is the one error a failed exchange returns, whatever failed: callers answer
// it without detail.
var ErrAuthentication = errors.New("scram: authentication failed")

// ErrMalformed marks a client message that does not follow RFC 5802. It wraps ErrAuthentication.
var ErrMalformed = fmt.Errorf("%w: malformed message", ErrAuthentication)

// Lookup returns the credential of user for the server's mechanism, or false.
type Lookup func(user string) (Credential, bool)

// serverState is where a server conversation stands.
type serverState int

const (
	serverAwaitFirst serverState = iota
	serverAwaitFinal
	serverDone
	serverFailed
)

// Server is one server-side exchange. It is not safe for concurrent use.
type Server struct {
	mechanism Mechanism
	lookup    Lookup
	// secret keys the made-up salts of unknown users, so the same unknown name gets the same salt.
	secret []byte
	nonce  func() string

	state           serverState
	user            string
	credential      Credential
	known           bool
	clientFirstBare string
	serverFirst     string
	combinedNonce   string
}

// NewServer starts an exchange. secret (any bytes, stable for the server's life) keys the fake
// salts given to unknown users.
func NewServer(m Mechanism, lookup Lookup, secret []byte) *Server {
	return &Server{mechanism: m, lookup: lookup, secret: secret, nonce: randomNonce}
}

// SetNonce replaces the server nonce generator (tests use the RFC's fixed nonces).
func (s *Server) SetNonce(nonce func() string) { s.nonce = nonce }

// User is the authenticated user once Done.
func (s *Server) User() string { return s.user }

// Done reports whether the exchange succeeded.
func (s *Server) Done() bool { return s.state == serverDone }

// Step takes the client's next message and returns the server's answer. Any error wraps
// ErrAuthentication and ends the exchange.
func (s *Server) Step(message []byte) ([]byte, error) {
	switch s.state {
	case serverAwaitFirst:
		out, err := s.first(string(message))
		if err != nil {
			s.state = serverFailed
			return nil, err
		}
		s.state = serverAwaitFinal
		return []byte(out), nil
	case serverAwaitFinal:
		out, err := s.final(string(message))
		if err != nil {
			s.state = serverFailed
			return nil, err
		}
		s.state = serverDone
		return []byte(out), nil
	}
	return nil, fmt.Errorf("%w: exchange already over", ErrAuthentication)
}

func (s *Server) first(message string) (string, error) {
	// gs2-header: "n,," or "y,," (no channel binding), optionally with "a=authzid".
	parts := strings.SplitN(message, ",", 3)
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") {
		return "", fmt.Errorf("%w: gs2 header", ErrMalformed)
	}
	bare := parts[2]
	attributes := strings.Split(bare, ",")
	if len(attributes) < 2 || !strings.HasPrefix(attributes[0], "n=") || !strings.HasPrefix(attributes[1], "r=") {
		return "", fmt.Errorf("%w: client-first-message", ErrMalformed)
	}
	user, err := unescapeName(attributes[0][2:])
	if err != nil {
		return "", err
	}
	if authzid := parts[1]; authzid != "" {
		if !strings.HasPrefix(authzid, "a=") {
			return "", fmt.Errorf("%w: authzid", ErrMalformed)
		}
		if id, err := unescapeName(authzid[2:]); err != nil || id != user {
			return "", fmt.Errorf("%w: authzid differs from the user", ErrAuthentication)
		}
	}
	clientNonce := attributes[1][2:]
	if clientNonce == "" || strings.ContainsAny(clientNonce, ",") {
		return "", fmt.Errorf("%w: nonce", ErrMalformed)
	}
	for _, extension := range attributes[2:] {
		// Kafka's one extension, tokenauth, is for delegation tokens, which are not served.
		if strings.HasPrefix(extension, "tokenauth=") {
			return "", fmt.Errorf("%w: delegation tokens not served", ErrAuthentication)
		}
	}
	s.user = user
	s.credential, s.known = s.lookup(user)
	if !s.known || s.credential.Mechanism != s.mechanism {
		s.known = false
		s.credential = s.fakeCredential(user)
	}
	s.clientFirstBare = bare
	s.combinedNonce = clientNonce + s.nonce()
	s.serverFirst = "r=" + s.combinedNonce + ",s=" + base64.StdEncoding.EncodeToString(s.credential.Salt) +
		",i=" + strconv.Itoa(s.credential.Iterations)
	return s.serverFirst, nil
}

func (s *Server) final(message string) (string, error) {
	withoutProof, proofText, found := strings.Cut(message, ",p=")
	if !found || strings.Contains(proofText, ",") {
		return "", fmt.Errorf("%w: client-final-message", ErrMalformed)
	}
	attributes := strings.Split(withoutProof, ",")
	if len(attributes) < 2 || !strings.HasPrefix(attributes[0], "c=") || !strings.HasPrefix(attributes[1], "r=") {
		return "", fmt.Errorf("%w: client-final-message", ErrMalformed)
	}
	binding, err := base64.StdEncoding.DecodeString(attributes[0][2:])
	if err != nil || !(strings.HasPrefix(string(binding), "n,") || strings.HasPrefix(string(binding), "y,")) {
		return "", fmt.Errorf("%w: channel binding", ErrMalformed)
	}
	// The nonce must end with the one the server sent: librdkafka (up to at least 2.x) repeats its
	// own nonce in front of it, and Kafka's server accepts that, so this one does too. The server's
	// random part is still there, which is what prevents replay.
	if !strings.HasSuffix(attributes[1][2:], s.combinedNonce) {
		return "", fmt.Errorf("%w: nonce mismatch", ErrAuthentication)
	}
	proof, err := base64.StdEncoding.DecodeString(proofText)
	if err != nil || len(proof) != s.mechanism.Size() {
		return "", fmt.Errorf("%w: proof", ErrMalformed)
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	clientSignature := s.mechanism.hmac(s.credential.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSignature[i]
	}
	if !constantTimeEqual(s.mechanism.sum(clientKey), s.credential.StoredKey) || !s.known {
		return "", ErrAuthentication
	}
	serverSignature := s.mechanism.hmac(s.credential.ServerKey, authMessage)
	return "v=" + base64.StdEncoding.EncodeToString(serverSignature), nil
}

// fakeCredential answers an unknown user as if it existed: a salt derived from the name (stable,
// so probing twice shows nothing) and keys nobody can match.
func (s *Server) fakeCredential(user string) Credential {
	salt := s.mechanism.hmac(s.secret, []byte("salt:"+user))[:24]
	key := make([]byte, s.mechanism.Size())
	rand.Read(key)
	return Credential{Mechanism: s.mechanism, Salt: salt, Iterations: MinIterations, StoredKey: key, ServerKey: key}
}

func constantTimeEqual(a, b []byte) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare(a, b) == 1
}

func randomNonce() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// unescapeName decodes a saslname: "=2C" is ',', "=3D" is '='; any other '=' is malformed.
func unescapeName(name string) (string, error) {
	if !strings.Contains(name, "=") {
		return name, nil
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '=' {
			b.WriteByte(name[i])
			continue
		}
		switch {
		case strings.HasPrefix(name[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(name[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: user name escape", ErrMalformed)
		}
		i += 2
	}
	return b.String(), nil
}

func escapeName(name string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(name)
}
