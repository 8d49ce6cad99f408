package netpoll

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Config configures a Server. Start from DefaultConfig and override fields.
type Config struct {
	// Address is the TCP address to listen on, "host:port", when Listeners is empty: one
	// plaintext listener named PLAINTEXT. Port 0 picks an ephemeral port; Server.Addr reports
	// the one chosen.
	Address string

	// Listeners are the sockets to serve, each with its name and security protocol; they share
	// the event loops and every bound below. Empty means one PLAINTEXT listener on Address.
	Listeners []ListenerConfig

	// HandshakeTimeout bounds a TLS handshake; MaxConcurrentHandshakes bounds how many run at
	// once over all TLS listeners (each on a goroutine of its own, see tls.go).
	HandshakeTimeout        time.Duration
	MaxConcurrentHandshakes int

	// EventLoops is the number of gnet event loops serving connections. 0 means GOMAXPROCS.
	EventLoops int

	// MaxFrameBytes is the largest frame (size prefix excluded) a client may send. A larger or
	// negative size prefix closes the connection with a warning before anything is allocated.
	MaxFrameBytes int

	// MaxInFlightRequests bounds, per connection, the requests handed to the Handler and not yet
	// answered (Send or Skip) and written. When reached, the connection's buffered frames wait.
	MaxInFlightRequests int

	// MaxInFlightBytes bounds, per connection, the frame bytes handed to the Handler and not yet
	// answered. A single frame is always admitted when nothing else is in flight on the
	// connection, so frames up to MaxFrameBytes make progress even when larger than this.
	MaxInFlightBytes int

	// MaxServerInFlightBytes bounds the frame bytes handed to the Handler and not yet answered,
	// summed over all connections. Must be at least MaxFrameBytes.
	MaxServerInFlightBytes int64

	// MaxBufferedOutboundBytes is a soft cap on response bytes queued in a connection's
	// user-space outbound buffer (bytes the kernel socket buffer could not take yet). Past it,
	// netpoll stops queueing further response bytes and resumes when the socket drains, so a
	// slow reader costs at most about this much memory plus the byte chunks the handler holds.
	MaxBufferedOutboundBytes int

	// MaxBufferedInputBytes bounds, across all connections, the bytes received and not yet
	// handed to the Handler: partially received frames and frames withheld by backpressure.
	// Past it the connection holding the most is closed. Must be at least MaxFrameBytes+4.
	MaxBufferedInputBytes int64

	// MaxBufferedOutputBytes bounds, across all connections, the response bytes answered and
	// not yet taken by the kernel: byte chunks of responses waiting to be written plus
	// connections' outbound buffers (file chunks cost nothing until copied). Past it the
	// connection holding the most is closed. Must be at least MaxBufferedOutboundBytes.
	MaxBufferedOutputBytes int64

	// ConnectionsMaxIdle closes a connection with nothing received, in flight or queued for this
	// long (Kafka's connections.max.idle.ms). 0 disables.
	ConnectionsMaxIdle time.Duration

	// RequestReceiveTimeout closes a connection whose current frame has been partially received
	// for this long (a client trickling bytes holds buffers). 0 disables.
	RequestReceiveTimeout time.Duration

	// MaxConnections bounds the open client connections; a connection accepted past it is
	// closed at once. 0 means no bound (the descriptor limit still applies).
	MaxConnections int

	// Logger receives connection-level warnings (bad frames, overflows) and gnet's own logs.
	// nil discards them.
	Logger *slog.Logger

	// Metrics is the set the sluice_net_* metrics are registered in. nil disables export
	// (the Server accessors still work).
	Metrics *metrics.Set
}

// ListenerConfig is one listening socket.
type ListenerConfig struct {
	// Name identifies the listener to the handler (Conn.Listener), e.g. CLIENT or INTERNAL.
	Name string
	// SecurityProtocol is Kafka's name for the listener's protocol: PLAINTEXT, SSL,
	// SASL_PLAINTEXT or SASL_SSL. netpoll only acts on whether it is TLS (SSL, SASL_SSL);
	// SASL is the handler's business.
	SecurityProtocol string
	// Address is "host:port"; port 0 picks an ephemeral port.
	Address string
	// TLS is the server configuration for SSL and SASL_SSL listeners (nil for the others). Its
	// MinVersion must be at least TLS 1.2.
	TLS *tls.Config
}

// isTLS reports whether the protocol wraps connections in TLS.
func (l ListenerConfig) isTLS() bool {
	return l.SecurityProtocol == "SSL" || l.SecurityProtocol == "SASL_SSL"
}

// listeners is Listeners, or the single listener Address stands for.
func (c Config) listeners() []ListenerConfig {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []ListenerConfig{{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Address: c.Address}}
}

// DefaultConfig returns the configuration sluice runs with unless told otherwise.
func DefaultConfig() Config {
	return Config{
		Address:                  "127.0.0.1:9092",
		EventLoops:               0,
		MaxFrameBytes:            100 << 20,
		MaxInFlightRequests:      128,
		MaxInFlightBytes:         64 << 20,
		MaxServerInFlightBytes:   512 << 20,
		MaxBufferedOutboundBytes: 4 << 20,
		MaxBufferedInputBytes:    512 << 20,
		MaxBufferedOutputBytes:   256 << 20,
		ConnectionsMaxIdle:       10 * time.Minute,
		RequestReceiveTimeout:    time.Minute,
		HandshakeTimeout:         10 * time.Second,
		MaxConcurrentHandshakes:  64,
		Logger:                   slog.Default(),
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("netpoll: invalid config")

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	names := map[string]bool{}
	for _, listener := range c.listeners() {
		if _, _, err := net.SplitHostPort(listener.Address); err != nil {
			return invalid("listener %s address %q: %v", listener.Name, listener.Address, err)
		}
		if listener.Name == "" || names[listener.Name] {
			return invalid("listener name %q empty or given twice", listener.Name)
		}
		names[listener.Name] = true
		switch listener.SecurityProtocol {
		case "PLAINTEXT", "SASL_PLAINTEXT":
			if listener.TLS != nil {
				return invalid("listener %s is %s but has a TLS config", listener.Name, listener.SecurityProtocol)
			}
		case "SSL", "SASL_SSL":
			if listener.TLS == nil {
				return invalid("listener %s is %s and needs a TLS config", listener.Name, listener.SecurityProtocol)
			}
			if listener.TLS.MinVersion < tls.VersionTLS12 {
				return invalid("listener %s allows TLS versions below 1.2", listener.Name)
			}
		default:
			return invalid("listener %s security protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
				listener.Name, listener.SecurityProtocol)
		}
	}
	if c.HandshakeTimeout <= 0 || c.MaxConcurrentHandshakes <= 0 {
		return invalid("handshake timeout %v and max concurrent handshakes %d must be positive",
			c.HandshakeTimeout, c.MaxConcurrentHandshakes)
	}
	switch {
	case c.MaxConnections < 0:
		return invalid("max connections %d is negative", c.MaxConnections)
	case c.EventLoops < 0:
		return invalid("event loops %d is negative", c.EventLoops)
	case c.MaxFrameBytes <= 0 || c.MaxFrameBytes > math.MaxInt32:
		return invalid("max frame bytes %d outside [1, %d]", c.MaxFrameBytes, math.MaxInt32)
	case c.MaxInFlightRequests <= 0:
		return invalid("max in-flight requests %d must be positive", c.MaxInFlightRequests)
	case c.MaxInFlightBytes <= 0:
		return invalid("max in-flight bytes %d must be positive", c.MaxInFlightBytes)
	case c.MaxServerInFlightBytes < int64(c.MaxFrameBytes):
		return invalid("max server in-flight bytes %d is below max frame bytes %d",
			c.MaxServerInFlightBytes, c.MaxFrameBytes)
	case c.MaxBufferedOutboundBytes <= 0:
		return invalid("max buffered outbound bytes %d must be positive", c.MaxBufferedOutboundBytes)
	case c.MaxBufferedInputBytes < int64(c.MaxFrameBytes)+frameHeaderBytes:
		return invalid("max buffered input bytes %d is below one maximal frame (%d bytes)",
			c.MaxBufferedInputBytes, int64(c.MaxFrameBytes)+frameHeaderBytes)
	case c.MaxBufferedOutputBytes < int64(c.MaxBufferedOutboundBytes):
		return invalid("max buffered output bytes %d is below max buffered outbound bytes %d",
			c.MaxBufferedOutputBytes, c.MaxBufferedOutboundBytes)
	case c.ConnectionsMaxIdle < 0:
		return invalid("connections max idle %v is negative", c.ConnectionsMaxIdle)
	case c.RequestReceiveTimeout < 0:
		return invalid("request receive timeout %v is negative", c.RequestReceiveTimeout)
	}
	return nil
}

// maxBufferedInboundBytes is the hard cap on bytes a connection may leave buffered in gnet's
// inbound buffer while netpoll withholds decoding (backpressure): enough for the in-flight
// window twice over plus one maximal frame. Past it the connection is closed.
func (c Config) maxBufferedInboundBytes() int {
	return 2*c.MaxInFlightBytes + c.MaxFrameBytes + frameHeaderBytes
}
