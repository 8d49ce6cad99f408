package console

import (
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Console serves the pages under /ui. Create it with New and stop it with Close.
type Console struct {
	cfg    Config
	logger *slog.Logger
	// shared are the clients of pages without login and of the sampler: nil when the listener
	// needs SASL and no sampler principal is configured (then there is no sampler).
	shared *kafkaClients
	// sessions are the logged-in browsers (only when Config.SASLMechanism is set).
	sessions *sessionStore
	// loginLimit slows password guessing: 5 failed logins a minute per remote host.
	loginLimit *loginLimiter
	pages      map[string]*template.Template
	mux        *http.ServeMux
	samples    *sampleRing
	csrfKey    []byte

	// The sampler starts with the first request (startSampling), so a broker whose console is
	// never opened sends itself no requests; it runs until Close.
	startSampler sync.Once
	stop         chan struct{}
	sampling     sync.WaitGroup // the sampler and the session sweeper
	closed       atomic.Bool
}

// New checks cfg and makes the console's Kafka clients (they dial on first use). The sampler
// starts with the first request.
func New(cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, logger: cfg.Logger, samples: newSampleRing(cfg.SampleHistory), stop: make(chan struct{})}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.csrfKey = make([]byte, 32)
	rand.Read(c.csrfKey)
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c.pages = pages
	switch {
	case cfg.SASLMechanism == "":
		c.shared, err = newKafkaClients(cfg, "sluice-console", credentials{})
	case cfg.SamplerUser != "":
		c.shared, err = newKafkaClients(cfg, "sluice-console-sampler", credentials{cfg.SASLMechanism, cfg.SamplerUser, cfg.SamplerPassword})
	}
	if err != nil {
		return nil, err
	}
	c.mux = c.routes()
	if cfg.SASLMechanism != "" {
		c.sessions = newSessionStore(cfg)
		c.loginLimit = newLoginLimiter(5, time.Minute, 10000)
		c.sampling.Add(1)
		go func() {
			defer c.sampling.Done()
			c.runSweeper(c.stop)
		}()
	}
	return c, nil
}

// startSampling starts the sampler once, unless the console is closed.
func (c *Console) startSampling() {
	c.startSampler.Do(func() {
		if c.closed.Load() || c.shared == nil {
			return
		}
		c.sampling.Add(1)
		go func() {
			defer c.sampling.Done()
			c.runSampler(c.stop)
		}()
	})
}

// Close stops the sampler and closes the Kafka clients; requests after Close fail.
func (c *Console) Close() error {
	c.closed.Store(true)
	c.startSampler.Do(func() {}) // no sampler starts from here on
	close(c.stop)
	c.sampling.Wait()
	if c.sessions != nil {
		c.sessions.sweep(time.Now(), true)
	}
	if c.shared != nil {
		return c.shared.close()
	}
	return nil
}

// ServeHTTP serves /ui and everything under it: with the shared clients, or, when the listener
// needs SASL, with the clients of the request's session (serveLoggedIn).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.cfg.SASLMechanism != "" {
		c.serveLoggedIn(w, r)
		return
	}
	c.startSampling()
	c.mux.ServeHTTP(w, withKafka(r, c.shared))
}

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	static, _ := fs.Sub(staticFiles, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.logout)
	mux.HandleFunc("GET /ui/{$}", c.clusterPage)
	mux.HandleFunc("GET /ui/topics", c.topicsPage)
	mux.HandleFunc("GET /ui/topics/{topic}", c.topicPage)
	mux.HandleFunc("GET /ui/topics/{topic}/messages", c.messagesPage)
	mux.HandleFunc("GET /ui/groups", c.groupsPage)
	mux.HandleFunc("GET /ui/groups/{group}", c.groupPage)
	mux.HandleFunc("GET /ui/throughput", c.throughputPage)
	mux.HandleFunc("GET /ui/config", c.configPage)
	mux.HandleFunc("POST /ui/topics", c.write("create-topic", "", c.createTopic))
	mux.HandleFunc("POST /ui/topics/{topic}/delete", c.write("delete-topic", "topic", c.deleteTopic))
	mux.HandleFunc("POST /ui/groups/{group}/reset-offsets", c.write("reset-offsets", "group", c.resetOffsets))
	mux.HandleFunc("POST /ui/groups/{group}/delete", c.write("delete-group", "group", c.deleteGroup))
	return mux
}

// pageData is what every page's template gets.
type pageData struct {
	Title         string
	Section       string // the nav entry to highlight
	Writes        bool
	CSRF          string
	User          string // the logged-in user; "" without login
	Login         bool   // the console asks for a login
	RefreshMillis int
	Now           time.Time
	Body          any
}

var pageNames = []string{"cluster", "topics", "topic", "messages", "groups", "group", "throughput", "config", "error", "login"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"bytes":   bytesText,
		"path":    url.PathEscape,
		"number":  shortNumber,
		"int32s":  joinInt32s,
		"clock":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
		"inputAt": func(t time.Time) string { return t.UTC().Format(timeLayout) },
	}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		clone := template.Must(layout.Clone())
		if pages[name], err = clone.ParseFS(templateFiles, "templates/"+name+".html"); err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
	}
	return pages, nil
}

func joinInt32s(values []int32) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ",")
}

// render writes page name with body; a template failure after the first byte can only be logged.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title, section string, body any) {
	data := pageData{Title: title, Section: section, Writes: c.cfg.Writes, Now: time.Now(), Body: body,
		RefreshMillis: int(max(c.cfg.SampleInterval, 500*time.Millisecond) / time.Millisecond),
		User:          userOf(r), Login: c.cfg.SASLMechanism != ""}
	if c.cfg.Writes || data.Login {
		data.CSRF = c.csrfToken(w, r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if err := c.pages[name].ExecuteTemplate(w, "layout.html", data); err != nil {
		c.logger.Warn("console: render", "page", name, "err", err)
	}
}

// fail renders the error page: 404 for what does not exist, 400 for a bad request, 502 when the
// cluster did not answer.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	c.render(w, r, status, "error", http.StatusText(status), "", err.Error())
}

var errNotFound = errors.New("not found")

// rateSpan is the time the charts cover.
func (c *Console) rateSpan() time.Duration {
	return c.cfg.SampleInterval * time.Duration(c.cfg.SampleHistory)
}

// Lazy serves a Console once one is set, and 503 before: sluiced mounts /ui before its broker
// (and so its Kafka listener) is up.
type Lazy struct{ console atomic.Pointer[Console] }

// Set makes l serve c (nil: 503 again).
func (l *Lazy) Set(c *Console) { l.console.Store(c) }

// ServeHTTP serves the console, or 503 while it is not set.
func (l *Lazy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c := l.console.Load(); c != nil {
		c.ServeHTTP(w, r)
		return
	}
	http.Error(w, "console: the broker is starting", http.StatusServiceUnavailable)
}
