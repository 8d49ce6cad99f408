package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/client"
)

const sessionCookie = "sluice_console_session"

// session is one logged-in browser: the user it logged in as and the Kafka clients that act as
// that user.
type session struct {
	id      string // the cookie's value: 32 random bytes, hex
	user    string
	kafka   *kafkaClients
	created time.Time
	// lastUsed is guarded by sessionStore.mu.
	lastUsed time.Time
}

// sessionStore holds the logged-in sessions. Expired sessions leave it on the next lookup of
// their id or at the next sweep (Console.runSweeper), whichever comes first; whoever removes a
// session closes its clients, outside the lock.
type sessionStore struct {
	idle, maxAge time.Duration
	limit        int
	mu           struct {
		sync.Mutex
		byID map[string]*session // Invariant: len(byID) <= limit
	}
}

func newSessionStore(cfg Config) *sessionStore {
	s := &sessionStore{idle: cfg.SessionIdleTimeout, maxAge: cfg.SessionMaxAge, limit: cfg.MaxSessions}
	s.mu.byID = map[string]*session{}
	return s
}

func (s *sessionStore) expired(one *session, now time.Time) bool {
	return now.Sub(one.lastUsed) > s.idle || now.Sub(one.created) > s.maxAge
}

// lookup returns the live session with id and marks it used; an expired one is removed and
// closed.
func (s *sessionStore) lookup(id string, now time.Time) *session {
	s.mu.Lock()
	one := s.mu.byID[id]
	if one != nil && s.expired(one, now) {
		delete(s.mu.byID, id)
		s.mu.Unlock()
		one.kafka.close()
		return nil
	}
	if one != nil {
		one.lastUsed = now
	}
	s.mu.Unlock()
	return one
}

// add stores one, evicting the least recently used session when the store is full.
func (s *sessionStore) add(one *session) {
	var evicted *session
	s.mu.Lock()
	if len(s.mu.byID) >= s.limit {
		for _, other := range s.mu.byID {
			if evicted == nil || other.lastUsed.Before(evicted.lastUsed) {
				evicted = other
			}
		}
		delete(s.mu.byID, evicted.id)
	}
	s.mu.byID[one.id] = one
	s.mu.Unlock()
	if evicted != nil {
		evicted.kafka.close()
	}
}

// remove ends the session with id, if any.
func (s *sessionStore) remove(id string) {
	s.mu.Lock()
	one := s.mu.byID[id]
	delete(s.mu.byID, id)
	s.mu.Unlock()
	if one != nil {
		one.kafka.close()
	}
}

// sweep ends every expired session (every session when all is set) and reports how many.
func (s *sessionStore) sweep(now time.Time, all bool) int {
	var ended []*session
	s.mu.Lock()
	for id, one := range s.mu.byID {
		if all || s.expired(one, now) {
			ended = append(ended, one)
			delete(s.mu.byID, id)
		}
	}
	s.mu.Unlock()
	for _, one := range ended {
		one.kafka.close()
	}
	return len(ended)
}

func (s *sessionStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.byID)
}

// runSweeper ends expired sessions every minute (or sooner for short timeouts) until stop
// closes. It sends no Kafka requests.
func (c *Console) runSweeper(stop <-chan struct{}) {
	ticker := time.NewTicker(min(time.Minute, max(c.cfg.SessionIdleTimeout/4, 10*time.Millisecond)))
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-ticker.C:
			c.sessions.sweep(now, false)
		}
	}
}

type userKey struct{}

// userOf is the logged-in user of r ("" without login).
func userOf(r *http.Request) string {
	user, _ := r.Context().Value(userKey{}).(string)
	return user
}

// serveLoggedIn serves r when the listener needs SASL: the login page and static files to
// anyone, everything else only to a live session, with that session's clients.
func (c *Console) serveLoggedIn(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ui/login" || strings.HasPrefix(r.URL.Path, "/ui/static/") {
		c.mux.ServeHTTP(w, r)
		return
	}
	var one *session
	if cookie, err := r.Cookie(sessionCookie); err == nil {
		one = c.sessions.lookup(cookie.Value, time.Now())
	}
	if one == nil {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		c.fail(w, r, http.StatusUnauthorized, errors.New("console: not logged in (or the session expired): log in and try again"))
		return
	}
	c.startSampling()
	r = withKafka(r, one.kafka)
	r = r.WithContext(context.WithValue(r.Context(), userKey{}, one.user))
	c.mux.ServeHTTP(w, r)
}

type loginBody struct {
	Next      string
	User      string
	Error     string
	Mechanism string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.SASLMechanism == "" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	body := loginBody{Next: safeNext(r.URL.Query().Get("next")), Mechanism: c.cfg.SASLMechanism}
	c.render(w, r, http.StatusOK, "login", "Log in", "", body)
}

// safeNext keeps a redirect target inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// login checks the user's password by authenticating to the broker as them (the broker is the
// only judge), then starts a session whose clients keep acting as them.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.cfg.SASLMechanism == "" {
		c.fail(w, r, http.StatusNotFound, errors.New("console: the listener needs no login"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := c.checkCSRF(r); err != nil {
		c.fail(w, r, http.StatusForbidden, err)
		return
	}
	body := loginBody{Next: safeNext(r.PostFormValue("next")), User: strings.TrimSpace(r.PostFormValue("user")), Mechanism: c.cfg.SASLMechanism}
	password := r.PostFormValue("password")
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	if !c.loginLimit.allowed(host, time.Now()) {
		body.Error = "Too many failed logins from your address: wait a minute and try again."
		c.render(w, r, http.StatusTooManyRequests, "login", "Log in", "", body)
		return
	}
	if body.User == "" || password == "" {
		body.Error = "Give a user name and a password."
		c.render(w, r, http.StatusBadRequest, "login", "Log in", "", body)
		return
	}
	kafka, err := newKafkaClients(c.cfg, "sluice-console", credentials{c.cfg.SASLMechanism, body.User, password})
	if err == nil {
		ctx, cancel := c.requestContext(r)
		err = checkLogin(ctx, kafka)
		cancel()
		if err != nil {
			kafka.close()
		}
	}
	if err != nil {
		status := http.StatusBadGateway
		body.Error = err.Error()
		if errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, client.ErrAuthentication) {
			status, body.Error = http.StatusUnauthorized, "Wrong user name or password."
			c.loginLimit.failed(host, time.Now())
		}
		c.logger.Info("console: login refused", "user", body.User, "remote", r.RemoteAddr, "err", err)
		c.render(w, r, status, "login", "Log in", "", body)
		return
	}
	c.loginLimit.succeeded(host)
	if cookie, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.remove(cookie.Value) // a login replaces the browser's earlier session
	}
	now := time.Now()
	one := &session{id: randomHex(32), user: body.User, kafka: kafka, created: now, lastUsed: now}
	c.sessions.add(one)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: one.id, Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, Expires: now.Add(c.cfg.SessionMaxAge)})
	c.logger.Info("console: login", "user", body.User, "remote", r.RemoteAddr)
	http.Redirect(w, r, body.Next, http.StatusSeeOther)
}

// checkLogin makes one request (Metadata for no topics) through each client, so both have
// authenticated (a wrong password fails here, not on the first page).
func checkLogin(ctx context.Context, kafka *kafkaClients) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none (nil would be all)
	if _, err := req.RequestWith(ctx, kafka.raw); err != nil {
		return fmt.Errorf("console: log in: %w", err)
	}
	if _, err := client.NewAdmin(kafka.client).ListTopics(ctx, false); err != nil {
		return fmt.Errorf("console: log in: %w", err)
	}
	return nil
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := c.checkCSRF(r); err != nil {
		c.fail(w, r, http.StatusForbidden, err)
		return
	}
	if cookie, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.remove(cookie.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	c.logger.Info("console: logout", "user", userOf(r), "remote", r.RemoteAddr)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
