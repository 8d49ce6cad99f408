package scram

import (
	"crypto/rand"
	"fmt"
)

// Credential is what a server stores for one user and mechanism.
type Credential struct {
	Mechanism  Mechanism `json:"mechanism"`
	Salt       []byte    `json:"salt"`
	Iterations int       `json:"iterations"`
	StoredKey  []byte    `json:"storedKey"`
	ServerKey  []byte    `json:"serverKey"`
}

// CredentialFromSalted derives the stored keys from a salted password (what a Kafka
// AlterUserScramCredentials upsertion carries).
func CredentialFromSalted(m Mechanism, saltedPassword, salt []byte, iterations int) (Credential, error) {
	if !m.Valid() {
		return Credential{}, fmt.Errorf("scram: unknown mechanism %d", int8(m))
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("scram: %d iterations outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 || len(saltedPassword) != m.Size() {
		return Credential{}, fmt.Errorf("scram: %s needs a salt and a %d-byte salted password", m, m.Size())
	}
	clientKey := m.hmac(saltedPassword, []byte("Client Key"))
	return Credential{
		Mechanism:  m,
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  m.sum(clientKey),
		ServerKey:  m.hmac(saltedPassword, []byte("Server Key")),
	}, nil
}

// NewCredential salts password with a fresh random 32-byte salt.
func NewCredential(m Mechanism, password string, iterations int) (Credential, error) {
	salt, salted, err := Salt(m, password, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSalted(m, salted, salt, iterations)
}

// Salt picks a random salt and salts password with it: the two fields of an
// AlterUserScramCredentials upsertion.
func Salt(m Mechanism, password string, iterations int) (salt, saltedPassword []byte, err error) {
	salt = make([]byte, 32)
	rand.Read(salt)
	saltedPassword, err = m.SaltedPassword(password, salt, iterations)
	return salt, saltedPassword, err
}

// Verify reports whether password matches the credential (used to check SASL/PLAIN passwords
// against SCRAM credentials). It costs one PBKDF2 run.
func (c Credential) Verify(password string) bool {
	salted, err := c.Mechanism.SaltedPassword(password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	clientKey := c.Mechanism.hmac(salted, []byte("Client Key"))
	return constantTimeEqual(c.Mechanism.sum(clientKey), c.StoredKey)
}
