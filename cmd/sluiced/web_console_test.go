package main

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/listener/testpki"
)

func TestConsoleDialsItsOwnListener(t *testing.T) {
	for listen, want := range map[string]string{"0.0.0.0:9092": "127.0.0.1:9092", "[::]:9092": "[::1]:9092", "10.1.2.3:9092": "10.1.2.3:9092"} {
		addr, err := net.ResolveTCPAddr("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		if got := dialable(addr); got != want {
			t.Errorf("dialable(%s) = %s, want %s", listen, got, want)
		}
	}
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "0.0.0.0": false, "10.1.2.3": false, "": false} {
		if got := isLoopback(host); got != want {
			t.Errorf("isLoopback(%q) = %v", host, got)
		}
	}
}

// consoleBrowser is an HTTP client with cookies for a sluiced's /ui, following no redirects.
type consoleBrowser struct {
	t    *testing.T
	base string
	http *http.Client
	csrf string
}

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func newConsoleBrowser(t *testing.T, d *daemon) *consoleBrowser {
	jar, _ := cookiejar.New(nil)
	return &consoleBrowser{t: t, base: "http://" + d.http, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// expect sends a GET (form nil) or a POST with the page's CSRF token and checks the status and
// that the Location header or body holds each of wants.
func (b *consoleBrowser) expect(path string, form url.Values, wantStatus int, wants ...string) string {
	b.t.Helper()
	var resp *http.Response
	var err error
	if form == nil {
		resp, err = b.http.Get(b.base + path)
	} else {
		form.Set("csrf", b.csrf)
		resp, err = b.http.PostForm(b.base+path, form)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	body := resp.Header.Get("Location") + string(raw)
	if m := consoleCSRF.FindStringSubmatch(body); m != nil {
		b.csrf = m[1]
	}
	if resp.StatusCode != wantStatus {
		b.t.Fatalf("%s: status %d, want %d\n%s", path, resp.StatusCode, wantStatus, body)
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			b.t.Errorf("%s: no %q in\n%s", path, want, body)
		}
	}
	return body
}

func (b *consoleBrowser) login(user, password string, wantStatus int) {
	b.t.Helper()
	b.expect("/ui/login", nil, 200, `id="login"`)
	b.expect("/ui/login", url.Values{"user": {user}, "password": {password}, "next": {"/ui/topics"}}, wantStatus)
}

// TestConsoleLogsInOnSASLListeners: sluiced's console asks for a login when its listener needs
// SASL (--require-sasl, or a SASL_SSL listener, with or without client certificates and a CA)
// and reaches the TLS listener with the broker's own trust; pages then act as the logged-in user.
func TestConsoleLogsInOnSASLListeners(t *testing.T) {
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "users")
	if err := os.WriteFile(usersFile, []byte("admin:admin-secret\nalice:alice-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, dir, "sluice")
	server := ca.Server(t, "server", testpki.Options{})
	for name, args := range map[string][]string{
		"require-sasl": {"--require-sasl"},
		"SASL_SSL with mTLS": {"--listeners", "SASL_SSL://127.0.0.1:0", "--tls-cert", server.CertFile, "--tls-key", server.KeyFile,
			"--tls-ca", ca.CertFile, "--tls-client-auth", "required"},
		// No CA given: the console trusts the broker's own certificate.
		"SASL_SSL without a CA": {"--listeners", "SASL_SSL://127.0.0.1:0", "--tls-cert", server.CertFile, "--tls-key", server.KeyFile},
	} {
		t.Run(name, func(t *testing.T) {
			args = append(args, "--sasl-plain-users", usersFile, "--super-users", "User:admin", "--ui-writes",
				"--ui-sasl-user", "admin", "--ui-sasl-password", "admin-secret", "--ui-sample-interval", "200ms")
			d := startDaemon(t, filepath.Join(t.TempDir(), "data"), args...)
			for deadline := time.Now().Add(30 * time.Second); d.readyStatus() != http.StatusOK; { // ready: the console is mounted
				if time.Now().After(deadline) {
					t.Fatalf("sluiced never became ready\n%s", d.logs())
				}
				time.Sleep(20 * time.Millisecond) // /readyz has no change signal
			}
			admin := newConsoleBrowser(t, d)
			admin.expect("/ui/", nil, 303, "/ui/login")
			admin.login("admin", "wrong", 401)
			admin.login("admin", "admin-secret", 303)
			admin.expect("/ui/topics", url.Values{"name": {"made"}, "partitions": {"2"}}, 303, "/ui/topics/made")
			admin.expect("/ui/topics", nil, 200, `href="/ui/topics/made"`, `id="user">admin<`)
			alice := newConsoleBrowser(t, d)
			alice.login("alice", "alice-secret", 303)
			if body := alice.expect("/ui/topics", nil, 200, "No topics yet"); strings.Contains(body, "made") {
				t.Error("alice, with no ACL, sees topic made")
			}
			alice.expect("/ui/topics", url.Values{"name": {"alices"}}, 403, "AUTHORIZATION_FAILED")
			alice.expect("/ui/logout", url.Values{}, 303, "/ui/login")
			alice.expect("/ui/topics", nil, 303, "/ui/login")
		})
	}
}

func TestConsoleMechanism(t *testing.T) {
	for enabled, want := range map[string]string{"PLAIN,SCRAM-SHA-512": "PLAIN", "SCRAM-SHA-256,SCRAM-SHA-512": "SCRAM-SHA-512",
		"SCRAM-SHA-256": "SCRAM-SHA-256", "GSSAPI": ""} {
		if got := consoleMechanism(strings.Split(enabled, ",")); got != want {
			t.Errorf("consoleMechanism(%s) = %q, want %q", enabled, got, want)
		}
	}
}
