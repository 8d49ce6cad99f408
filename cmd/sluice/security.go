package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

// security is how every command secures its connections to the brokers. It is the one place
// connection security is set up: flags are registered by register, and connect (session.go)
// takes clientOptions and kgoOptions for both of its clients. SASL settings belong here too.
type security struct {
	tls     bool   // TLS with the system roots when no CA is given
	tlsCA   string // PEM CA bundle the brokers' certificates must chain to
	tlsCert string // PEM client certificate (mTLS)
	tlsKey  string
}

// envDefault is $name, else fallback.
func envDefault(name, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return fallback
}

func (s *security) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.tls, "tls", envDefault("SLUICE_TLS", "") == "1" || envDefault("SLUICE_TLS", "") == "true",
		"connect with TLS, verifying brokers against the system roots unless --tls-ca is given ($SLUICE_TLS=1); implied by --tls-ca and --tls-cert")
	fs.StringVar(&s.tlsCA, "tls-ca", envDefault("SLUICE_TLS_CA", ""), "PEM `file` of CA certificates the brokers' certificates must chain to ($SLUICE_TLS_CA)")
	fs.StringVar(&s.tlsCert, "tls-cert", envDefault("SLUICE_TLS_CERT", ""), "PEM `file` of this client's certificate, for brokers that ask for one ($SLUICE_TLS_CERT)")
	fs.StringVar(&s.tlsKey, "tls-key", envDefault("SLUICE_TLS_KEY", ""), "PEM `file` of --tls-cert's private key ($SLUICE_TLS_KEY)")
}

// tlsConfig is the TLS client configuration, or nil for plaintext.
func (s security) tlsConfig() (*tls.Config, error) {
	if !s.tls && s.tlsCA == "" && s.tlsCert == "" && s.tlsKey == "" {
		return nil, nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", s.tlsCA)
		}
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if s.tlsCert != "" {
		certificate, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		config.Certificates = []tls.Certificate{certificate}
	}
	return config, nil
}

// clientOptions are the security options for sluice's client.
func (s security) clientOptions() ([]client.Option, error) {
	config, err := s.tlsConfig()
	if err != nil || config == nil {
		return nil, err
	}
	return []client.Option{client.WithTLS(config)}, nil
}

// kgoOptions are the security options for the franz-go client.
func (s security) kgoOptions() ([]kgo.Opt, error) {
	config, err := s.tlsConfig()
	if err != nil || config == nil {
		return nil, err
	}
	return []kgo.Opt{kgo.DialTLSConfig(config)}, nil
}
