package listener

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// ClientAuth says whether a TLS listener asks clients for certificates (Kafka's
// ssl.client.auth).
type ClientAuth string

const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = "none"
	// ClientAuthRequested asks for one and verifies it against the CA when given.
	ClientAuthRequested ClientAuth = "requested"
	// ClientAuthRequired refuses clients without a certificate the CA signed.
	ClientAuthRequired ClientAuth = "required"
)

// ParseClientAuth parses none, requested or required.
func ParseClientAuth(text string) (ClientAuth, error) {
	switch auth := ClientAuth(strings.ToLower(strings.TrimSpace(text))); auth {
	case ClientAuthNone, ClientAuthRequested, ClientAuthRequired:
		return auth, nil
	case "":
		return ClientAuthNone, nil
	}
	return "", invalid("client auth %q: want none, requested or required", text)
}

func (a ClientAuth) tlsType() tls.ClientAuthType {
	switch a {
	case ClientAuthRequested:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// Files names the PEM files of a node's TLS identity.
type Files struct {
	// CertFile and KeyFile are the certificate chain and its private key. Both or neither.
	CertFile string
	KeyFile  string
	// CAFile holds the CA certificates that client certificates (server side) and peers'
	// server certificates (client side) must chain to. Empty on the client side means the
	// system roots.
	CAFile string
	// ClientAuth applies to server configs.
	ClientAuth ClientAuth
}

// Validate reports settings that cannot work.
func (f Files) Validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return invalid("TLS certificate and key must be given together")
	}
	if _, err := ParseClientAuth(string(f.ClientAuth)); err != nil {
		return err
	}
	if f.ClientAuth != "" && f.ClientAuth != ClientAuthNone && f.CAFile == "" {
		return invalid("TLS client auth %s needs a CA file to verify client certificates", f.ClientAuth)
	}
	return nil
}

// material is one loaded set of files.
type material struct {
	certificate *tls.Certificate // nil when no CertFile
	roots       *x509.CertPool   // nil when no CAFile
	stamp       string           // modification times and sizes the material was read at
}

// Reloader holds a node's TLS material and reloads it on demand or when its files change.
type Reloader struct {
	files   Files
	logger  *slog.Logger
	reloads *metrics.Counter
	failed  *metrics.Counter
	current atomic.Pointer[material]
	mu      sync.Mutex // serializes reloads

	stop chan struct{}
	done chan struct{}
}

// DefaultPollInterval is how often sluiced looks for changed TLS files unless told otherwise.
const DefaultPollInterval = 5 * time.Second

// NewReloader loads files (failing when they cannot be used) and, when poll is positive,
// starts a goroutine that reloads them when their modification time or size changed, checked
// every poll; Close stops it. set may be nil.
func NewReloader(files Files, poll time.Duration, logger *slog.Logger, set *metrics.Set) (*Reloader, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if set == nil {
		set = metrics.NewSet()
	}
	r := &Reloader{
		files:   files,
		logger:  logger,
		reloads: set.GetOrCreateCounter("sluice_tls_reloads_total"),
		failed:  set.GetOrCreateCounter("sluice_tls_reload_errors_total"),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	loaded, err := load(files)
	if err != nil {
		return nil, err
	}
	r.current.Store(loaded)
	if poll > 0 {
		go r.watch(poll)
	} else {
		close(r.done)
	}
	return r, nil
}

// Close stops watching the files. Configs already handed out keep working with the last
// material.
func (r *Reloader) Close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

func (r *Reloader) watch(poll time.Duration) {
	defer close(r.done)
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-ticker.C:
		}
		if stamp(r.files) != r.current.Load().stamp {
			if err := r.Reload(); err != nil {
				r.logger.Error("listener: TLS files changed but cannot be loaded; keeping the previous ones", "err", err)
			}
		}
	}
}

// Reload reads the files again. On failure the previous material stays in use.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	loaded, err := load(r.files)
	if err != nil {
		r.failed.Inc()
		return err
	}
	r.current.Store(loaded)
	r.reloads.Inc()
	serial := ""
	if loaded.certificate != nil && loaded.certificate.Leaf != nil {
		serial = loaded.certificate.Leaf.SerialNumber.String()
	}
	r.logger.Info("listener: TLS certificates reloaded", "cert", r.files.CertFile, "serial", serial, "ca", r.files.CAFile)
	return nil
}

// stamp summarizes the files' modification times and sizes.
func stamp(files Files) string {
	var b strings.Builder
	for _, name := range []string{files.CertFile, files.KeyFile, files.CAFile} {
		if name == "" {
			b.WriteString("-;")
			continue
		}
		info, err := os.Stat(name)
		if err != nil {
			b.WriteString("?;")
			continue
		}
		fmt.Fprintf(&b, "%d/%d;", info.ModTime().UnixNano(), info.Size())
	}
	return b.String()
}

func load(files Files) (*material, error) {
	loaded := &material{stamp: stamp(files)}
	if files.CertFile != "" {
		certificate, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("listener: load TLS certificate %s and key %s: %w", files.CertFile, files.KeyFile, err)
		}
		loaded.certificate = &certificate
	}
	if files.CAFile != "" {
		pem, err := os.ReadFile(files.CAFile)
		if err != nil {
			return nil, fmt.Errorf("listener: read TLS CA file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("listener: TLS CA file %s holds no PEM certificate", files.CAFile)
		}
		loaded.roots = roots
	}
	return loaded, nil
}

// ErrNoCertificate is returned by ServerConfig when no certificate was configured.
var ErrNoCertificate = errors.New("listener: a TLS listener needs --tls-cert and --tls-key")

// ServerConfig returns a config for TLS listeners. Each handshake takes the newest material
// (GetConfigForClient), so a reload applies to the next connection.
func (r *Reloader) ServerConfig() (*tls.Config, error) {
	return r.ServerConfigWith(r.files.ClientAuth)
}

// ClientConfig returns a config for dialing TLS peers (inter-broker links, the CLI). The
// peer's certificate is verified against the newest CA material (the system roots when there
// is no CA file) and the dialed host name; the newest certificate, if any, is offered as the
// client certificate.
func (r *Reloader) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if loaded := r.current.Load(); loaded.certificate != nil {
				return loaded.certificate, nil
			}
			return &tls.Certificate{}, nil // none: the server decides whether that is enough
		},
		// The roots can change under a long-lived config, which RootCAs cannot express; the
		// chain and host name are verified in VerifyConnection instead, against the current
		// roots. Nothing is skipped: a connection VerifyConnection refuses fails its handshake.
		InsecureSkipVerify: true,
		VerifyConnection: func(state tls.ConnectionState) error {
			return verifyServer(state, r.current.Load().roots)
		},
	}
}

// verifyServer checks a server's chain and name as crypto/tls would with RootCAs = roots.
func verifyServer(state tls.ConnectionState, roots *x509.CertPool) error {
	if len(state.PeerCertificates) == 0 {
		return errors.New("listener: server sent no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, certificate := range state.PeerCertificates[1:] {
		intermediates.AddCert(certificate)
	}
	_, err := state.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		DNSName:       state.ServerName,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("listener: server certificate: %w", err)
	}
	return nil
}

// ServerConfigWith is ServerConfig with another client-certificate policy (brokers ask each
// other for certificates whatever clients are asked for).
func (r *Reloader) ServerConfigWith(auth ClientAuth) (*tls.Config, error) {
	if r.current.Load().certificate == nil {
		return nil, ErrNoCertificate
	}
	if auth != ClientAuthNone && auth != "" && r.current.Load().roots == nil {
		return nil, invalid("TLS client auth %s needs a CA file", auth)
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		loaded := r.current.Load()
		return &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{*loaded.certificate},
			ClientAuth:   auth.tlsType(),
			ClientCAs:    loaded.roots,
			// Full-size records from the first byte: Kafka responses are large and the peer is
			// not a browser waiting for the first bytes.
			DynamicRecordSizingDisabled: true,
		}, nil
	}
	return base, nil
}
