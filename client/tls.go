package client

import (
	"context"
	"crypto/tls"
	"net"
)

// WithTLS makes every broker connection a TLS session with config (TLS 1.2 at least, whatever
// config says). When config names no ServerName, each broker's certificate is verified against
// the host the client dials. Default: plaintext.
func WithTLS(config *tls.Config) Option {
	return func(c *clientConfig) { c.tls = config }
}

// startTLS wraps a freshly dialed connection in TLS when the client is configured for it and
// completes the handshake within ctx.
func startTLS(ctx context.Context, cfg *clientConfig, address string, conn net.Conn) (net.Conn, error) {
	if cfg.tls == nil {
		return conn, nil
	}
	config := cfg.tls.Clone()
	if config.MinVersion < tls.VersionTLS12 {
		config.MinVersion = tls.VersionTLS12
	}
	if config.ServerName == "" {
		if host, _, err := net.SplitHostPort(address); err == nil {
			config.ServerName = host
		}
	}
	session := tls.Client(conn, config)
	if err := session.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return session, nil
}
