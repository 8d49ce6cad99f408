package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// Mechanism is one SCRAM hash. Its numeric values are Kafka's ScramMechanism codes
// (DescribeUserScramCredentials / AlterUserScramCredentials).
type Mechanism int8

const (
	SHA256 Mechanism = 1
	SHA512 Mechanism = 2
)

// Iteration bounds Kafka enforces for stored credentials.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// Mechanisms lists the served mechanisms.
var Mechanisms = []Mechanism{SHA256, SHA512}

// ParseMechanism reads a SASL mechanism name ("SCRAM-SHA-256", "SCRAM-SHA-512").
func ParseMechanism(name string) (Mechanism, bool) {
	switch name {
	case "SCRAM-SHA-256":
		return SHA256, true
	case "SCRAM-SHA-512":
		return SHA512, true
	}
	return 0, false
}

// Valid reports whether m is a known mechanism.
func (m Mechanism) Valid() bool { return m == SHA256 || m == SHA512 }

// String is the SASL mechanism name.
func (m Mechanism) String() string {
	switch m {
	case SHA256:
		return "SCRAM-SHA-256"
	case SHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("SCRAM-unknown-%d", int8(m))
}

func (m Mechanism) newHash() func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

// Size is the hash output size in bytes.
func (m Mechanism) Size() int { return m.newHash()().Size() }

func (m Mechanism) hmac(key, message []byte) []byte {
	mac := hmac.New(m.newHash(), key)
	mac.Write(message)
	return mac.Sum(nil)
}

func (m Mechanism) sum(data []byte) []byte {
	h := m.newHash()()
	h.Write(data)
	return h.Sum(nil)
}

// SaltedPassword is Hi(Normalize(password), salt, i) of RFC 5802 (without SASLprep: Kafka's Java
// implementation does not apply it either).
func (m Mechanism) SaltedPassword(password string, salt []byte, iterations int) ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("scram: unknown mechanism %d", int8(m))
	}
	key, err := pbkdf2.Key(m.newHash(), password, salt, iterations, m.Size())
	if err != nil {
		return nil, fmt.Errorf("scram: salt password: %w", err)
	}
	return key, nil
}
