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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Console serves the pages under /ui. Create it with New and stop it with Close.
type Console struct {
	cfg     Config
	logger  *slog.Logger
	raw     *kgo.Client    // franz-go, for the requests client/ has no call for
	client  *client.Client // sluice's client: the message browser and topic admin
	pages   map[string]*template.Template
	mux     *http.ServeMux
	samples *sampleRing
	csrfKey []byte
	// messages holds the message browser's consumer while no page uses it: one page reads at a
	// time (a Consumer per page would cost connections, and client.Client keeps every consumer
	// it made until it closes).
	messages chan *client.Consumer

	// The sampler starts with the first request (startSampling), so a broker whose console is
	// never opened sends itself no requests; it runs until Close.
	startSampler sync.Once
	stop         chan struct{}
	sampling     sync.WaitGroup
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
	franzOptions := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("sluice-console"),
		kgo.RetryTimeout(cfg.RequestTimeout), kgo.DialTimeout(min(cfg.RequestTimeout, 5*time.Second))}, cfg.FranzOptions...)
	if c.raw, err = kgo.NewClient(franzOptions...); err != nil {
		return nil, fmt.Errorf("console: franz-go client: %w", err)
	}
	clientOptions := append([]client.Option{client.WithSeedBrokers(cfg.Brokers...), client.WithClientID("sluice-console"),
		client.WithRequestTimeout(cfg.RequestTimeout)}, cfg.ClientOptions...)
	if c.client, err = client.New(clientOptions...); err != nil {
		c.raw.Close()
		return nil, fmt.Errorf("console: client: %w", err)
	}
	consumer, err := client.NewConsumer(c.client, client.WithFetchMaxWait(200*time.Millisecond),
		client.WithConsumerBufferBytes(4<<20), client.WithFetchMaxPartitionBytes(1<<20))
	if err != nil {
		c.client.Close()
		c.raw.Close()
		return nil, fmt.Errorf("console: consumer: %w", err)
	}
	c.messages = make(chan *client.Consumer, 1)
	c.messages <- consumer
	c.mux = c.routes()
	return c, nil
}

// startSampling starts the sampler once, unless the console is closed.
func (c *Console) startSampling() {
	c.startSampler.Do(func() {
		if c.closed.Load() {
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
	consumer := <-c.messages // waits for a page still reading
	consumer.Close()
	c.raw.Close()
	return c.client.Close()
}

// ServeHTTP serves /ui and everything under it.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.startSampling()
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	static, _ := fs.Sub(staticFiles, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
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
	RefreshMillis int
	Now           time.Time
	Body          any
}

var pageNames = []string{"cluster", "topics", "topic", "messages", "groups", "group", "throughput", "config", "error"}

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
		RefreshMillis: int(max(c.cfg.SampleInterval, 500*time.Millisecond) / time.Millisecond)}
	if c.cfg.Writes {
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
