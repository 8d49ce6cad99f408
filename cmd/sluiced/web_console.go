package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/console"
	"github.com/sluice-mq/sluice/listener"
)

// startConsole starts the web console (package console) as a Kafka client of b's own (first)
// listener and mounts it in ui; nil without an HTTP listener. The listener's security decides
// the console's: TLS with the broker's own trust (consoleTLS), and, when it needs SASL, a login
// for each browser (console.Config.SASLMechanism).
func startConsole(opts options, b *broker.Broker, logger *slog.Logger, ui *console.Lazy) (*console.Console, error) {
	if opts.http == "" {
		return nil, nil
	}
	opts.ui.Brokers, opts.ui.Logger = []string{dialable(b.Addr())}, logger
	if err := consoleSecurity(&opts.ui, opts); err != nil {
		return nil, err
	}
	web, err := console.New(opts.ui)
	if err != nil {
		return nil, err
	}
	ui.Set(web)
	if host, _, _ := net.SplitHostPort(opts.http); opts.ui.Writes && opts.ui.SASLMechanism == "" && !isLoopback(host) {
		logger.Warn("--ui-writes on a non-loopback --http address: anyone who reaches it can create and delete topics (the listener needs no SASL, so the console has no login)", "http", opts.http)
	}
	return web, nil
}

// consoleListener is the protocol of the listener the console dials (the first).
func consoleListener(opts options) listener.SecurityProtocol {
	if len(opts.broker.Listeners) > 0 {
		return opts.broker.Listeners[0].Protocol
	}
	return listener.Plaintext
}

// consoleSecurity fills ui's TLS options and login mechanism from the listener's protocol.
func consoleSecurity(ui *console.Config, opts options) error {
	protocol := consoleListener(opts)
	security := opts.broker.Security
	if security.RequireSASL || protocol.SASL() {
		ui.SASLMechanism = consoleMechanism(security.EnabledMechanisms())
		if ui.SASLMechanism == "" {
			return fmt.Errorf("web console: none of the enabled SASL mechanisms %v is PLAIN or SCRAM", security.EnabledMechanisms())
		}
	} else if ui.SamplerUser != "" {
		return errors.New("--ui-sasl-user: the console's listener needs no SASL")
	}
	if protocol.TLS() {
		config := consoleTLS(opts.broker, opts.listeners.tls.ClientAuth)
		ui.FranzOptions = append(ui.FranzOptions, kgo.DialTLSConfig(config))
		ui.ClientOptions = append(ui.ClientOptions, client.WithTLS(config))
	}
	return nil
}

// consoleMechanism picks how sessions authenticate: PLAIN when enabled (the broker checks it
// against --sasl-plain-users and SCRAM users alike), else SCRAM-SHA-512, else SCRAM-SHA-256.
func consoleMechanism(enabled []string) string {
	for _, m := range []string{broker.MechanismPlain, broker.MechanismScramSHA512, broker.MechanismScramSHA256} {
		if slices.Contains(enabled, m) {
			return m
		}
	}
	return ""
}

// consoleTLS is the TLS config the console dials its own TLS listener with. The server is
// trusted when it shows this broker's own current certificate (--tls-cert, as reloaded), or a
// certificate that verifies against --tls-ca (system roots without one) for the dialed host, as
// inter-broker links check. The broker's certificate is offered as the client certificate only
// when the listener requires one (--tls-client-auth required): on a SASL_SSL listener the SASL
// login still decides the principal; on an SSL listener the console then acts as the broker's
// TLS principal.
func consoleTLS(b broker.Config, clientAuth listener.ClientAuth) *tls.Config {
	peers := b.InterBrokerTLS // from the same files: verifies against the CA, offers our certificate
	config := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification happens in VerifyConnection (the certificate can be reloaded; RootCAs
		// cannot follow it). Nothing is skipped: a connection it refuses fails its handshake.
		InsecureSkipVerify: true,
		VerifyConnection: func(state tls.ConnectionState) error {
			if len(state.PeerCertificates) > 0 && bytes.Equal(state.PeerCertificates[0].Raw, ownCertificate(b.TLS)) {
				return nil
			}
			if peers == nil || peers.VerifyConnection == nil {
				return errors.New("web console: the listener's certificate is not this broker's")
			}
			return peers.VerifyConnection(state)
		},
	}
	if clientAuth == listener.ClientAuthRequired && peers != nil {
		config.GetClientCertificate = peers.GetClientCertificate
	}
	return config
}

// ownCertificate is the DER of the leaf certificate server currently presents (nil if none).
func ownCertificate(server *tls.Config) []byte {
	if server == nil {
		return nil
	}
	current := server
	if server.GetConfigForClient != nil {
		if c, err := server.GetConfigForClient(&tls.ClientHelloInfo{}); err == nil && c != nil {
			current = c
		}
	}
	if len(current.Certificates) == 0 || len(current.Certificates[0].Certificate) == 0 {
		return nil
	}
	return current.Certificates[0].Certificate[0]
}

// dialable turns a listener's address into one this process can dial (a wildcard host becomes
// loopback).
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
