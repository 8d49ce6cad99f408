package console

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/broker"
	"github.com/sluice-mq/sluice/broker/brokertest"
	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/scram"
)

// saslBroker starts an in-process broker whose listener requires SASL, with PLAIN users admin
// (a super user), alice and bob, and returns it with an admin client.
func saslBroker(t *testing.T) (*broker.Broker, *client.Client) {
	t.Helper()
	b := brokertest.Start(t, func(cfg *broker.Config) {
		cfg.Security.RequireSASL = true
		cfg.Security.PlainUsers = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
		cfg.Security.SuperUsers = []string{"User:admin"}
	})
	admin, err := client.New(client.WithSeedBrokers(b.Addr().String()), client.WithSASL(client.SASLPlain, "admin", "admin-secret"),
		client.WithRequestTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return b, admin
}

func loginConsole(t *testing.T, b *broker.Broker, mutate func(*Config)) (*Console, *httptest.Server) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Brokers, cfg.Writes, cfg.SampleInterval, cfg.SASLMechanism = []string{b.Addr().String()}, true, 200*time.Millisecond, client.SASLPlain
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(c)
	t.Cleanup(func() { server.Close(); c.Close() })
	return c, server
}

// browserSession is an HTTP client with cookies that does not follow redirects.
type browserSession struct {
	t      *testing.T
	server *httptest.Server
	http   *http.Client
	csrf   string
}

func newBrowser(t *testing.T, server *httptest.Server) *browserSession {
	jar, _ := cookiejar.New(nil)
	return &browserSession{t: t, server: server, http: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browserSession) do(method, path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodGet {
		resp, err = b.http.Get(b.server.URL + path)
	} else {
		if form == nil {
			form = url.Values{}
		}
		form.Set("csrf", b.csrf)
		resp, err = b.http.PostForm(b.server.URL+path, form)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if match := csrfField.FindStringSubmatch(string(body)); match != nil {
		b.csrf = match[1]
	}
	return resp, string(body)
}

func (b *browserSession) expect(method, path string, form url.Values, wantStatus int, wants ...string) (*http.Response, string) {
	b.t.Helper()
	resp, body := b.do(method, path, form)
	if resp.StatusCode != wantStatus {
		b.t.Fatalf("%s %s: status %d, want %d\n%s", method, path, resp.StatusCode, wantStatus, body)
	}
	text := resp.Header.Get("Location") + body
	for _, want := range wants {
		if !strings.Contains(text, want) {
			b.t.Errorf("%s %s: no %q in\n%s", method, path, want, text)
		}
	}
	return resp, body
}

func (b *browserSession) login(user, password string, wantStatus int) *http.Response {
	b.t.Helper()
	b.expect(http.MethodGet, "/ui/login", nil, 200, `id="login"`)
	resp, _ := b.expect(http.MethodPost, "/ui/login", url.Values{"user": {user}, "password": {password}, "next": {"/ui/topics"}}, wantStatus)
	return resp
}

// TestLoginActsAsTheUser: behind a SASL listener the console asks for a login, refuses a wrong
// password, and shows and changes only what the broker's ACLs allow the logged-in user; logout
// ends the session and closes its clients.
func TestLoginActsAsTheUser(t *testing.T) {
	b, admin := saslBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adminAPI := client.NewAdmin(admin)
	if err := adminAPI.CreateTopics(ctx, client.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1},
		client.TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := adminAPI.CreateACLs(ctx, acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "t", PatternType: acl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: acl.OperationRead, Permission: acl.PermissionAllow}); err != nil {
		t.Fatal(err)
	}
	c, server := loginConsole(t, b, func(cfg *Config) { cfg.SamplerUser, cfg.SamplerPassword = "admin", "admin-secret" })

	alice := newBrowser(t, server)
	alice.expect(http.MethodGet, "/ui/topics", nil, 303, "/ui/login?next=%2Fui%2Ftopics")
	alice.expect(http.MethodGet, "/ui/static/console.css", nil, 200) // static files need no login
	alice.login("alice", "wrong", 401)
	alice.expect(http.MethodGet, "/ui/topics", nil, 303, "/ui/login")
	if n := c.sessions.count(); n != 0 {
		t.Fatalf("%d sessions after a refused login", n)
	}
	resp := alice.login("alice", "alice-secret", 303)
	if where := resp.Header.Get("Location"); where != "/ui/topics" {
		t.Errorf("login redirected to %q, want the page asked for", where)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != sessionCookie || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode ||
		len(cookies[0].Value) != 64 || cookies[0].Expires.IsZero() {
		t.Errorf("session cookie %+v: want one random HttpOnly SameSite=Strict cookie with an expiry", cookies)
	}
	_, body := alice.expect(http.MethodGet, "/ui/topics", nil, 200, `href="/ui/topics/t"`, `id="user">alice<`, `id="logout"`)
	if strings.Contains(body, `href="/ui/topics/u"`) {
		t.Error("alice, with READ on t only, sees topic u")
	}
	if resp, _ := alice.do(http.MethodGet, "/ui/topics/u", nil); resp.StatusCode == 200 {
		t.Error("alice opens topic u")
	}
	alice.expect(http.MethodGet, "/ui/topics/t", nil, 200, "online")
	alice.expect(http.MethodGet, "/ui/topics/t/messages", nil, 200, `id="messages"`)
	alice.expect(http.MethodGet, "/ui/", nil, 200, `id="nodes"`)
	alice.expect(http.MethodGet, "/ui/groups", nil, 200)
	alice.expect(http.MethodGet, "/ui/config", nil, 403, "CLUSTER_AUTHORIZATION_FAILED") // broker configs need DESCRIBE_CONFIGS on the cluster
	// The charts' sampler acts as admin; alice's throughput page shows none of its other topics.
	deadline := time.Now().Add(20 * time.Second)
	for !sampled(c, "u") {
		if time.Now().After(deadline) {
			t.Fatal("the sampler never saw topic u")
		}
		time.Sleep(20 * time.Millisecond) // polling the ring: the sampler has no change signal
	}
	if _, body := alice.expect(http.MethodGet, "/ui/throughput", nil, 200, `href="/ui/topics/t"`); strings.Contains(body, `href="/ui/topics/u"`) {
		t.Error("alice's throughput page shows topic u")
	}
	// A write without the ACL shows the broker's refusal.
	alice.expect(http.MethodPost, "/ui/topics", url.Values{"name": {"alices"}}, 403, "AUTHORIZATION_FAILED")
	alice.expect(http.MethodPost, "/ui/groups/g/delete", url.Values{"confirm": {"g"}}, 403, "GROUP_AUTHORIZATION_FAILED")

	adminBrowser := newBrowser(t, server)
	adminBrowser.login("admin", "admin-secret", 303)
	adminBrowser.login("admin", "admin-secret", 303) // again: replaces the first session
	adminBrowser.expect(http.MethodPost, "/ui/topics", url.Values{"name": {"made"}, "partitions": {"2"}}, 303, "/ui/topics/made")
	adminBrowser.expect(http.MethodGet, "/ui/topics", nil, 200, `href="/ui/topics/u"`, `href="/ui/topics/made"`, `id="user">admin<`)
	if n := c.sessions.count(); n != 2 {
		t.Errorf("%d sessions, want alice's and admin's", n)
	}

	// Logout ends alice's session (a POST without the CSRF token does not).
	stranger := newBrowser(t, server)
	stranger.http.Jar = alice.http.Jar
	stranger.expect(http.MethodPost, "/ui/logout", nil, 403)
	alice.expect(http.MethodPost, "/ui/logout", nil, 303, "/ui/login")
	alice.expect(http.MethodGet, "/ui/topics", nil, 303, "/ui/login")
	alice.expect(http.MethodPost, "/ui/topics", url.Values{"name": {"late"}}, 401)
	if n := c.sessions.count(); n != 1 {
		t.Errorf("%d sessions after alice logged out, want admin's", n)
	}
	adminBrowser.expect(http.MethodGet, "/ui/topics/made", nil, 200)
}

func sampled(c *Console, topic string) bool {
	samples := c.samples.snapshot()
	if len(samples) == 0 {
		return false
	}
	_, ok := samples[len(samples)-1].TopicEnds[topic]
	return ok
}

// TestSessionExpiresAndSCRAM: a SCRAM-SHA-512 user logs in (after five wrong passwords the
// host is refused for a while, even with the right one); the idle session is ended and its
// clients closed by the sweeper, and the next page asks for a login again. Without a sampler
// user no sampler runs.
func TestSessionExpiresAndSCRAM(t *testing.T) {
	b, admin := saslBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.NewAdmin(admin).UpsertScramUser(ctx, scram.SHA512, "carol", "carol-secret", 4096); err != nil {
		t.Fatal(err)
	}
	c, server := loginConsole(t, b, func(cfg *Config) {
		cfg.SASLMechanism, cfg.SessionIdleTimeout = client.SASLScramSHA512, 300*time.Millisecond
	})
	carol := newBrowser(t, server)
	for range 5 {
		carol.login("carol", "wrong", 401)
	}
	carol.login("carol", "carol-secret", 429) // too many failures from this host: not even asked
	c.loginLimit.succeeded("127.0.0.1")       // as if the minute had passed
	carol.login("carol", "carol-secret", 303)
	carol.expect(http.MethodGet, "/ui/", nil, 200, `id="user">carol<`)
	deadline := time.Now().Add(10 * time.Second)
	for c.sessions.count() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle session never ended")
		}
		time.Sleep(20 * time.Millisecond) // the sweeper has no change signal
	}
	carol.expect(http.MethodGet, "/ui/", nil, 303, "/ui/login")
	if c.shared != nil || len(c.samples.snapshot()) != 0 {
		t.Error("a sampler ran without a sampler user")
	}
}

func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{"/ui/topics?x=1": "/ui/topics?x=1", "//evil.example/ui/": "/ui/", "https://evil.example/": "/ui/",
		"/ui/\r\nSet-Cookie: x": "/ui/", "": "/ui/", "/metrics": "/ui/"} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
