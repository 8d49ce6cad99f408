package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/listener"
)

// listenerFlags are the named-listener and TLS flags. Without --listeners the broker serves
// one PLAINTEXT listener on --listen, as before.
type listenerFlags struct {
	listeners   string
	protocolMap string
	advertised  string
	interBroker string
	tls         listener.Files
	clientAuth  string
	reloadCheck time.Duration
}

func (l *listenerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.listeners, "listeners", "", "named Kafka listeners as NAME://host:port,... (e.g. CLIENT://0.0.0.0:9092,INTERNAL://127.0.0.1:9093); replaces --listen")
	fs.StringVar(&l.protocolMap, "listener-security-protocol-map", "", "each listener's security protocol as NAME:PROTOCOL,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); a listener named after its protocol needs no entry")
	fs.StringVar(&l.advertised, "advertised-listeners", "", "address given to clients on each listener, as NAME://host:port,...; default: the bound address")
	fs.StringVar(&l.interBroker, "inter-broker-listener-name", "", "the listener other brokers dial (replication, transaction markers); its security also covers the Raft port; default: the first")
	fs.StringVar(&l.tls.CertFile, "tls-cert", "", "PEM certificate chain of SSL and SASL_SSL listeners (and this broker's client certificate to other brokers); reloaded on change and SIGHUP")
	fs.StringVar(&l.tls.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&l.tls.CAFile, "tls-ca", "", "PEM CA certificates that client certificates and other brokers' certificates must chain to")
	fs.DurationVar(&l.reloadCheck, "tls-reload-check-interval", listener.DefaultPollInterval, "how often the TLS files are checked for changes and reloaded (0: only on SIGHUP)")
	fs.StringVar(&l.clientAuth, "tls-client-auth", "none", "client certificates on TLS listeners: none, requested (verified when given) or required (mTLS)")
}

// apply puts the parsed listeners into the broker config (TLS configs come later, in run).
func (l *listenerFlags) apply(b *broker.Config) error {
	auth, err := listener.ParseClientAuth(l.clientAuth)
	if err != nil {
		return fmt.Errorf("--tls-client-auth: %w", err)
	}
	l.tls.ClientAuth = auth
	if err := l.tls.Validate(); err != nil {
		return err
	}
	if l.listeners == "" {
		if l.protocolMap != "" || l.advertised != "" || l.interBroker != "" {
			return fmt.Errorf("--listener-security-protocol-map, --advertised-listeners and --inter-broker-listener-name need --listeners")
		}
		return nil
	}
	if b.Listeners, err = listener.Parse(l.listeners, l.protocolMap); err != nil {
		return fmt.Errorf("--listeners: %w", err)
	}
	if l.advertised != "" {
		if _, b.AdvertisedListeners, err = listener.ParseEndpoints(l.advertised); err != nil {
			return fmt.Errorf("--advertised-listeners: %w", err)
		}
	}
	b.InterBrokerListener = l.interBroker
	if b.InterBrokerListener != "" {
		b.InterBrokerListener = upper(b.InterBrokerListener)
	}
	// Placeholders so Validate can check that TLS listeners have certificates; run replaces
	// them with the reloading configs.
	if l.tls.CertFile != "" {
		b.TLS, b.RaftTLS, b.InterBrokerTLS = placeholderTLS, placeholderTLS, placeholderTLS
	}
	return nil
}

// startTLS loads the TLS files (when given), fills the broker's TLS configs and reloads the
// files on SIGHUP until ctx ends. The returned stop waits for that.
func (l *listenerFlags) startTLS(ctx context.Context, b *broker.Config, logger *slog.Logger, set *metrics.Set) (stop func(), err error) {
	if l.tls.CertFile == "" && l.tls.CAFile == "" {
		return func() {}, nil
	}
	reloader, err := listener.NewReloader(l.tls, l.reloadCheck, logger, set)
	if err != nil {
		return nil, err
	}
	if l.tls.CertFile != "" {
		if b.TLS, err = reloader.ServerConfig(); err != nil {
			reloader.Close()
			return nil, err
		}
		// Brokers always ask each other for certificates when there is a CA to check them.
		raftAuth := listener.ClientAuthNone
		if l.tls.CAFile != "" {
			raftAuth = listener.ClientAuthRequired
		}
		b.RaftTLS, _ = reloader.ServerConfigWith(raftAuth)
	}
	b.InterBrokerTLS = reloader.ClientConfig()
	hangups := make(chan os.Signal, 1)
	signal.Notify(hangups, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hangups:
				if err := reloader.Reload(); err != nil {
					logger.Error("SIGHUP: TLS files cannot be loaded; keeping the previous ones", "err", err)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hangups)
		<-done
		reloader.Close()
	}, nil
}

// placeholderTLS stands for a TLS config between flag parsing and run.
var placeholderTLS = &tls.Config{MinVersion: tls.VersionTLS12}

func upper(s string) string { return strings.ToUpper(strings.TrimSpace(s)) }
