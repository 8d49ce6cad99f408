package netpoll

import (
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
	// Address is the TCP address to listen on, "host:port". Port 0 picks an ephemeral port;
	// Server.Addr reports the one chosen.
	Address string

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
	if _, _, err := net.SplitHostPort(c.Address); err != nil {
		return invalid("address %q: %v", c.Address, err)
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
