package scram

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Client is the client side of one exchange: First, then Final with the server's first message,
// then Verify with the server's final message. It is not safe for concurrent use.
type Client struct {
	mechanism Mechanism
	user      string
	password  string
	nonce     string

	clientFirstBare string
	authMessage     string
	saltedPassword  []byte
}

// NewClient starts an exchange for user and password.
func NewClient(m Mechanism, user, password string) *Client {
	return &Client{mechanism: m, user: user, password: password, nonce: randomNonce()}
}

// SetNonce fixes the client nonce (tests use the RFC's); call it before First.
func (c *Client) SetNonce(nonce string) { c.nonce = nonce }

// First is the client-first-message.
func (c *Client) First() []byte {
	c.clientFirstBare = "n=" + escapeName(c.user) + ",r=" + c.nonce
	return []byte("n,," + c.clientFirstBare)
}

// Final answers the server-first-message with the client-final-message.
func (c *Client) Final(serverFirst []byte) ([]byte, error) {
	var nonce, saltText, iterationsText string
	for _, attribute := range strings.Split(string(serverFirst), ",") {
		switch {
		case strings.HasPrefix(attribute, "r="):
			nonce = attribute[2:]
		case strings.HasPrefix(attribute, "s="):
			saltText = attribute[2:]
		case strings.HasPrefix(attribute, "i="):
			iterationsText = attribute[2:]
		case strings.HasPrefix(attribute, "e="):
			return nil, fmt.Errorf("scram: server refused: %s", attribute[2:])
		}
	}
	if !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) {
		return nil, fmt.Errorf("scram: server nonce does not extend the client's")
	}
	salt, err := base64.StdEncoding.DecodeString(saltText)
	if err != nil || len(salt) == 0 {
		return nil, fmt.Errorf("scram: server sent a bad salt")
	}
	iterations, err := strconv.Atoi(iterationsText)
	if err != nil || iterations < 1 || iterations > 1<<20 {
		return nil, fmt.Errorf("scram: server sent iteration count %q", iterationsText)
	}
	c.saltedPassword, err = c.mechanism.SaltedPassword(c.password, salt, iterations)
	if err != nil {
		return nil, err
	}
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte("n,,")) + ",r=" + nonce
	c.authMessage = c.clientFirstBare + "," + string(serverFirst) + "," + withoutProof
	clientKey := c.mechanism.hmac(c.saltedPassword, []byte("Client Key"))
	storedKey := c.mechanism.sum(clientKey)
	clientSignature := c.mechanism.hmac(storedKey, []byte(c.authMessage))
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ clientSignature[i]
	}
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), nil
}

// Verify checks the server-final-message: only a server that holds the credential can sign it.
func (c *Client) Verify(serverFinal []byte) error {
	text := string(serverFinal)
	if strings.HasPrefix(text, "e=") {
		return fmt.Errorf("scram: server refused: %s", text[2:])
	}
	signature, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(text, "v="))
	if err != nil || !strings.HasPrefix(text, "v=") {
		return fmt.Errorf("scram: malformed server-final-message")
	}
	serverKey := c.mechanism.hmac(c.saltedPassword, []byte("Server Key"))
	if !constantTimeEqual(signature, c.mechanism.hmac(serverKey, []byte(c.authMessage))) {
		return fmt.Errorf("scram: server signature does not verify")
	}
	return nil
}
