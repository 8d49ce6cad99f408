package netpoll

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/panjf2000/gnet/v2"

	"github.com/sluice-mq/sluice/loglimit"
)

// Handler serves requests. All three methods run on the connection's event loop and must not
// block.
type Handler interface {
	// Serve is called for each complete frame (size prefix stripped), in arrival order.
	// frame is a fresh copy the handler owns. The handler answers through res exactly once,
	// inline or later from any goroutine.
	Serve(conn *Conn, frame []byte, res *Responder)
	// Opened is called once when a connection is accepted, before its first Serve.
	Opened(conn *Conn)
	// Closed is called once when the connection is gone, after every outstanding request has
	// been retired (their done callbacks ran with ErrConnectionClosed).
	Closed(conn *Conn)
}

// Server is a running listener and its event loops.
type Server struct {
	config  Config
	handler Handler
	logger  *slog.Logger
	metrics serverMetrics
	// badInputLog, overflowLog and acceptLog rate-limit the lines a peer can trigger at will.
	badInputLog *loglimit.Limiter
	overflowLog *loglimit.Limiter
	acceptLog   *loglimit.Limiter
	tlsLog      *loglimit.Limiter
	// address is the first listener's bound address.
	address   net.Addr
	listeners []*boundListener

	engine    gnet.Engine
	acceptors []*acceptor // one per listener
	watcher   *writabilityWatcher
	// handshakeSlots holds a token per TLS handshake running (bounded by
	// MaxConcurrentHandshakes).
	handshakeSlots chan struct{}

	// failure is set once, when the server can no longer accept connections.
	failure struct {
		once   sync.Once
		err    error
		signal chan struct{} // closed when err is set
	}

	// closing is set once Close starts: no new connections, no new requests.
	closing atomic.Bool
	// nextConnectionID numbers connections from 1.
	nextConnectionID atomic.Uint64
	// openConnections counts connections between OnOpen and OnClose.
	openConnections atomic.Int64
	// inFlightBytes is the server-wide frame bytes admitted and not yet retired.
	// Invariant: 0 <= inFlightBytes <= config.MaxServerInFlightBytes.
	inFlightBytes atomic.Int64
	// bufferedInput and bufferedOutput are the sums of the connections' inputHeld and
	// outputHeld; evictingInput and evictingOutput the part held by connections marked for
	// eviction and not yet closed (see bounds.go).
	bufferedInput  atomic.Int64
	bufferedOutput atomic.Int64
	evictingInput  atomic.Int64
	evictingOutput atomic.Int64
	// peakBufferedInput and peakBufferedOutput are the high-water marks of the two sums.
	peakBufferedInput  atomic.Int64
	peakBufferedOutput atomic.Int64
	// starvedCount mirrors len(mu.starved) so releases skip the lock when nobody waits.
	starvedCount atomic.Int64

	sendfileBytes   atomic.Uint64
	copiedFileBytes atomic.Uint64

	copyBuffers sync.Pool // *[]byte of copyBufferBytes
	tlsRecords  sync.Pool // *[]byte gathering one write's TLS records (tls.go)

	mu struct {
		sync.Mutex
		connections map[uint64]*Conn
		starved     []*Conn // connections waiting for server-wide budget
		drained     bool    // drainedSignal is closed
	}
	// drainedSignal is closed when closing is set and no connection is left.
	drainedSignal chan struct{}

	// wakeGate keeps Wake calls away from event loops that are shutting down: after gnet
	// closes a poller its eventfd number may be reused by an unrelated file.
	wakeGate struct {
		sync.RWMutex
		stopped bool
	}

	runDone   chan struct{} // closed when gnet.Run returns
	runErr    error         // gnet.Run's result, read after runDone
	closeOnce sync.Once
	closeErr  error
}

type serverMetrics struct {
	bytesIn         *metrics.Counter
	bytesOut        *metrics.Counter
	sendfileBytes   *metrics.Counter
	copiedFileBytes *metrics.Counter
	framesRejected  *metrics.Counter
	outputParks     *metrics.Counter
	connections     *metrics.Gauge
	// tlsHandshakeFailures counts TLS connections closed because their handshake failed.
	tlsHandshakeFailures *metrics.Counter
	evictions            map[evictReason]*metrics.Counter
}

// evictReason labels sluice_net_connections_evicted_total: why netpoll closed a connection
// (or refused one) to protect the server.
type evictReason string

const (
	evictMaxConnections  evictReason = "max_connections" // accepted past MaxConnections
	evictFileDescriptors evictReason = "fd_exhausted"    // shed while descriptors ran out
	evictInputBytes      evictReason = "input_bytes"     // biggest holder past MaxBufferedInputBytes
	evictOutputBytes     evictReason = "output_bytes"    // biggest holder past MaxBufferedOutputBytes
	evictIdle            evictReason = "idle"            // idle past ConnectionsMaxIdle
	evictRequestTimeout  evictReason = "request_timeout" // partial frame older than RequestReceiveTimeout
)

func (m serverMetrics) evicted(reason evictReason) *metrics.Counter {
	counter, ok := m.evictions[reason]
	if !ok {
		panic("netpoll: eviction reason without a counter: " + string(reason))
	}
	return counter
}

func newServerMetrics(set *metrics.Set) serverMetrics {
	if set == nil {
		set = metrics.NewSet() // private and never written out
	}
	evictions := make(map[evictReason]*metrics.Counter)
	for _, reason := range []evictReason{
		evictMaxConnections, evictFileDescriptors, evictInputBytes, evictOutputBytes, evictIdle, evictRequestTimeout,
	} {
		evictions[reason] = set.GetOrCreateCounter(`sluice_net_connections_evicted_total{reason="` + string(reason) + `"}`)
	}
	return serverMetrics{
		evictions:       evictions,
		bytesIn:         set.GetOrCreateCounter("sluice_net_bytes_in_total"),
		bytesOut:        set.GetOrCreateCounter("sluice_net_bytes_out_total"),
		sendfileBytes:   set.GetOrCreateCounter("sluice_net_sendfile_bytes_total"),
		copiedFileBytes: set.GetOrCreateCounter("sluice_net_copied_file_bytes_total"),
		framesRejected:  set.GetOrCreateCounter("sluice_net_frames_rejected_total"),
		outputParks:     set.GetOrCreateCounter("sluice_net_output_parks_total"),
		connections:     set.GetOrCreateGauge("sluice_net_connections", nil),

		tlsHandshakeFailures: set.GetOrCreateCounter("sluice_net_tls_handshake_failures_total"),
	}
}

// Listen binds cfg.Address and serves it with h in the background. It returns once the
// listener is bound; Close stops it.
func Listen(cfg Config, h Handler) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrInvalidConfig)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		config:        cfg,
		handler:       h,
		logger:        logger,
		metrics:       newServerMetrics(cfg.Metrics),
		badInputLog:   loglimit.New(logger, loglimit.DefaultInterval, loglimit.DefaultBurst),
		overflowLog:   loglimit.New(logger, loglimit.DefaultInterval, loglimit.DefaultBurst),
		acceptLog:     loglimit.New(logger, loglimit.DefaultInterval, loglimit.DefaultBurst),
		tlsLog:        loglimit.New(logger, loglimit.DefaultInterval, loglimit.DefaultBurst),
		drainedSignal: make(chan struct{}),
		runDone:       make(chan struct{}),
	}
	s.mu.connections = make(map[uint64]*Conn)
	s.copyBuffers.New = func() any {
		buffer := make([]byte, copyBufferBytes)
		return &buffer
	}
	s.tlsRecords.New = func() any {
		buffer := make([]byte, 0, copyBufferBytes+copyBufferBytes/64)
		return &buffer
	}
	s.failure.signal = make(chan struct{})
	s.handshakeSlots = make(chan struct{}, cfg.MaxConcurrentHandshakes)
	closeListeners := func() {
		for _, a := range s.acceptors {
			_ = a.socket.Close()
			a.closeSpare()
		}
	}
	for _, listenerConfig := range cfg.listeners() {
		socket, err := listenTCP(listenerConfig.Address)
		if err != nil {
			closeListeners()
			return nil, err
		}
		bound := &boundListener{config: listenerConfig, address: socket.Addr()}
		s.listeners = append(s.listeners, bound)
		s.acceptors = append(s.acceptors, newAcceptor(s, bound, socket))
	}
	s.address = s.listeners[0].address
	watcher, err := newWritabilityWatcher(s.writable)
	if err != nil {
		closeListeners()
		return nil, err
	}
	s.watcher = watcher
	abandon := func() {
		s.watcher.stop()
		closeListeners()
	}

	// gnet insists on a listener of its own. It gets a Unix socket in a private directory that is
	// removed as soon as the engine has booted, so nobody can ever connect to it; connections
	// come only from the acceptor (see acceptor.go).
	placeholderDir, err := os.MkdirTemp("", "sluice-netpoll-")
	if err != nil {
		abandon()
		return nil, fmt.Errorf("netpoll: placeholder listener directory: %w", err)
	}
	defer os.RemoveAll(placeholderDir)

	eventLoops := cfg.EventLoops
	if eventLoops == 0 {
		eventLoops = runtime.GOMAXPROCS(0)
	}
	started := make(chan struct{})
	events := &eventHandler{server: s, started: started}
	go func() {
		defer close(s.runDone)
		s.runErr = gnet.Run(events, "unix://"+filepath.Join(placeholderDir, "unused.sock"),
			gnet.WithNumEventLoop(eventLoops),
			gnet.WithReusePort(false),
			// Registered connections go to the loop with the fewest; gnet asks for a balancer
			// other than round robin when Register is used.
			gnet.WithLoadBalancing(gnet.LeastConnections),
			gnet.WithTicker(true), // OnTick: start signal and connection timeouts
			gnet.WithLogger(gnetLogger{logger: logger}),
		)
	}()
	select {
	case <-started:
	case <-s.runDone:
		abandon()
		return nil, fmt.Errorf("netpoll: start event loops: %w", s.runErr)
	}
	for _, a := range s.acceptors {
		a.start()
	}
	go s.watchEngine()
	return s, nil
}

// watchEngine marks the server failed if the event loops stop while it is not closing.
func (s *Server) watchEngine() {
	<-s.runDone
	if !s.closing.Load() {
		s.fail(fmt.Errorf("netpoll: event loops stopped: %v", s.runErr))
	}
}

// fail records why the server can no longer serve new connections, once.
func (s *Server) fail(err error) {
	s.failure.once.Do(func() {
		s.failure.err = err
		close(s.failure.signal)
		s.logger.Error("netpoll: server can no longer accept connections", "err", err)
	})
}

// Failed returns why the server can no longer accept connections (the listener failed for good
// or the event loops stopped on their own), or nil while it can. Close does not set it.
func (s *Server) Failed() error {
	select {
	case <-s.failure.signal:
		return s.failure.err
	default:
		return nil
	}
}

// FailedSignal is closed when Failed becomes non-nil.
func (s *Server) FailedSignal() <-chan struct{} { return s.failure.signal }

// Addr is the first listener's bound address, with an ephemeral port resolved.
func (s *Server) Addr() net.Addr { return s.address }

// ListenerAddr is the bound address of the listener named name, or nil.
func (s *Server) ListenerAddr(name string) net.Addr {
	for _, bound := range s.listeners {
		if bound.config.Name == name {
			return bound.address
		}
	}
	return nil
}

// boundListener is a listener and the address it got.
type boundListener struct {
	config  ListenerConfig
	address net.Addr
}

// SendfileBytes is the number of response bytes this server sent with sendfile(2).
func (s *Server) SendfileBytes() uint64 { return s.sendfileBytes.Load() }

// CopiedFileBytes is the number of file-chunk bytes this server read into memory and queued,
// because the socket was full or output was already queued.
func (s *Server) CopiedFileBytes() uint64 { return s.copiedFileBytes.Load() }

// BufferedInputBytes is the bytes received on all connections and not yet handed to the
// handler; PeakBufferedInputBytes its high-water mark.
func (s *Server) BufferedInputBytes() int64     { return s.bufferedInput.Load() }
func (s *Server) PeakBufferedInputBytes() int64 { return s.peakBufferedInput.Load() }

// BufferedOutputBytes is the response bytes answered on all connections and not yet taken by
// the kernel (file chunks excluded); PeakBufferedOutputBytes its high-water mark.
func (s *Server) BufferedOutputBytes() int64     { return s.bufferedOutput.Load() }
func (s *Server) PeakBufferedOutputBytes() int64 { return s.peakBufferedOutput.Load() }

// InFlightBytes is the server-wide frame bytes handed to the handler and not yet answered.
func (s *Server) InFlightBytes() int64 { return s.inFlightBytes.Load() }

// Close stops accepting connections and decoding requests, waits until every request already
// handed to the handler is answered and written (or ctx ends), then closes all connections and
// stops the event loops. It always stops the server; the error reports a ctx that ended
// first, with the abandoned responses retired with ErrConnectionClosed.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.close(ctx) })
	return s.closeErr
}

func (s *Server) close(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	connections := make([]*Conn, 0, len(s.mu.connections))
	for _, c := range s.mu.connections {
		connections = append(connections, c)
	}
	s.signalDrainedLocked()
	s.mu.Unlock()
	for _, a := range s.acceptors {
		a.stop() // after closing is set: a connection registered meanwhile is refused
	}
	for _, c := range connections {
		c.scheduleWake() // each connection notices closing and closes once answered
	}

	var waitErr error
	select {
	case <-s.drainedSignal:
	case <-ctx.Done():
		waitErr = fmt.Errorf("netpoll: close: in-flight responses abandoned: %w", ctx.Err())
	}

	s.stopWakes()
	stopNow, cancel := context.WithCancel(context.Background())
	cancel() // Engine.Stop only triggers the shutdown; runDone is what we wait for
	_ = s.engine.Stop(stopNow)
	<-s.runDone
	s.watcher.stop()
	if waitErr != nil {
		return waitErr
	}
	if s.runErr != nil {
		return fmt.Errorf("netpoll: event loops: %w", s.runErr)
	}
	return nil
}

func (s *Server) signalDrainedLocked() {
	if s.closing.Load() && len(s.mu.connections) == 0 && !s.mu.drained {
		s.mu.drained = true
		close(s.drainedSignal)
	}
}

// stopWakes blocks until no Wake is in progress and prevents new ones.
func (s *Server) stopWakes() {
	s.wakeGate.Lock()
	s.wakeGate.stopped = true
	s.wakeGate.Unlock()
}

// wake queues a pass of c.process on c's event loop.
func (s *Server) wake(c *Conn) {
	s.wakeGate.RLock()
	defer s.wakeGate.RUnlock()
	if s.wakeGate.stopped {
		return
	}
	if err := c.gnetConn.Wake(nil); err != nil {
		s.logger.Debug("netpoll: wake failed", "remote", c.remoteAddr, "err", err)
	}
}

// writable is the watcher's callback: c's socket can take more bytes.
func (s *Server) writable(connectionID uint64) {
	s.mu.Lock()
	c := s.mu.connections[connectionID]
	s.mu.Unlock()
	if c == nil {
		return
	}
	c.writableArmed.Store(false)
	c.scheduleWake()
}

// reserveBudget takes frameBytes of server-wide budget, or registers c to be woken when budget
// is released and reports false.
func (s *Server) reserveBudget(c *Conn, frameBytes int) bool {
	if s.tryReserve(frameBytes) {
		return true
	}
	if !c.starved.Swap(true) {
		s.mu.Lock()
		s.mu.starved = append(s.mu.starved, c)
		s.starvedCount.Add(1)
		s.mu.Unlock()
	}
	// Budget released between the failed attempt and the registration woke nobody: retry.
	return s.tryReserve(frameBytes)
}

func (s *Server) tryReserve(frameBytes int) bool {
	for {
		current := s.inFlightBytes.Load()
		if current+int64(frameBytes) > s.config.MaxServerInFlightBytes {
			return false
		}
		if s.inFlightBytes.CompareAndSwap(current, current+int64(frameBytes)) {
			return true
		}
	}
}

// releaseBudget returns frameBytes of server-wide budget and wakes connections starved of it.
func (s *Server) releaseBudget(frameBytes int) {
	if s.inFlightBytes.Add(-int64(frameBytes)) < 0 {
		panic("netpoll: server in-flight bytes went negative")
	}
	if frameBytes == 0 || s.starvedCount.Load() == 0 {
		return
	}
	s.mu.Lock()
	starved := s.mu.starved
	s.mu.starved = nil
	s.starvedCount.Store(0)
	s.mu.Unlock()
	for _, c := range starved {
		c.starved.Store(false)
		c.scheduleWake()
	}
}
