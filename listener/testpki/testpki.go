// Package testpki makes throwaway certificate authorities and certificates for tests: a CA,
// server certificates for 127.0.0.1 and localhost, client certificates with a chosen subject,
// expired ones, all written as PEM files into a test's directory. Keys are ECDSA P-256.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Certificate *x509.Certificate
	key         *ecdsa.PrivateKey
	// CertFile is the CA certificate as a PEM file.
	CertFile string
	dir      string
}

// Pair is an issued certificate and its key, in memory and as PEM files.
type Pair struct {
	Certificate *x509.Certificate
	TLS         tls.Certificate
	CertFile    string
	KeyFile     string
}

var serials = big.NewInt(time.Now().UnixNano())

func nextSerial() *big.Int {
	serials.Add(serials, big.NewInt(1))
	return new(big.Int).Set(serials)
}

// NewCA makes a CA named name with its files in dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certificate, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Certificate: certificate, key: key, dir: dir, CertFile: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Options shape an issued certificate.
type Options struct {
	// Subject defaults to CN=<file name>.
	Subject pkix.Name
	// Expired makes a certificate whose validity ended an hour ago.
	Expired bool
}

// Server issues a server (and client) certificate for 127.0.0.1, ::1 and localhost, written
// as <name>.pem and <name>-key.pem.
func (ca *CA) Server(t testing.TB, name string, options Options) *Pair {
	return ca.issue(t, name, options, true)
}

// Client issues a client certificate, written as <name>.pem and <name>-key.pem.
func (ca *CA) Client(t testing.TB, name string, options Options) *Pair {
	return ca.issue(t, name, options, false)
}

func (ca *CA) issue(t testing.TB, name string, options Options, server bool) *Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	subject := options.Subject
	if len(subject.Names) == 0 && subject.CommonName == "" && len(subject.ExtraNames) == 0 {
		subject = pkix.Name{CommonName: name}
	}
	notBefore, notAfter := time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if options.Expired {
		notBefore, notAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	}
	template := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		template.ExtKeyUsage = append(template.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		template.DNSNames = []string{"localhost"}
		template.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.Certificate, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certificate, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair := &Pair{
		Certificate: certificate,
		TLS:         tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: certificate},
		CertFile:    filepath.Join(ca.dir, name+".pem"),
		KeyFile:     filepath.Join(ca.dir, name+"-key.pem"),
	}
	writePEM(t, pair.KeyFile, "PRIVATE KEY", keyDER)
	writePEM(t, pair.CertFile, "CERTIFICATE", der)
	return pair
}

// Pool is a certificate pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate)
	return pool
}

// writePEM writes the file atomically (a reloader polling it never reads half of it).
func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	temporary := path + ".tmp"
	if err := os.WriteFile(temporary, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(temporary, path); err != nil {
		t.Fatal(err)
	}
}
