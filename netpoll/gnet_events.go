package netpoll

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// eventHandler adapts gnet's callbacks to the Server.
type eventHandler struct {
	gnet.BuiltinEventEngine
	server *Server
	// started is closed on the first tick: gnet calls OnBoot before it creates the event loops,
	// and starts the ticker only once they exist, so Register works from then on.
	started chan<- struct{}
	ticked  bool // touched only by gnet's ticker goroutine
}

func (h *eventHandler) OnBoot(engine gnet.Engine) gnet.Action {
	h.server.engine = engine
	return gnet.None
}

// OnTick runs on gnet's ticker goroutine (not an event loop), first right after start.
func (h *eventHandler) OnTick() (time.Duration, gnet.Action) {
	if !h.ticked {
		h.ticked = true
		close(h.started)
	}
	return h.server.tick(), gnet.None
}

// tcpAddress converts a kernel socket address to a *net.TCPAddr, or nil if it is not IP.
func tcpAddress(socketAddress unix.Sockaddr) *net.TCPAddr {
	switch address := socketAddress.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(address.Addr[:]).To16(), Port: address.Port}
	case *unix.SockaddrInet6:
		zone := ""
		if address.ZoneId != 0 {
			if iface, err := net.InterfaceByIndex(int(address.ZoneId)); err == nil {
				zone = iface.Name
			}
		}
		return &net.TCPAddr{IP: net.IP(address.Addr[:]), Port: address.Port, Zone: zone}
	default:
		return nil
	}
}

func (h *eventHandler) OnShutdown(gnet.Engine) {
	// From here the pollers are about to close; no more Wakes.
	h.server.stopWakes()
}

func (h *eventHandler) OnOpen(gnetConn gnet.Conn) ([]byte, gnet.Action) {
	s := h.server
	pending, ok := gnetConn.Context().(*pendingConn)
	if !ok {
		return nil, gnet.Close // not registered by an acceptor
	}
	c := &Conn{
		server:     s,
		gnetConn:   gnetConn,
		listener:   pending.listener,
		principal:  pending.principal,
		in:         gnetConn,
		tls:        pending.tls,
		id:         s.nextConnectionID.Add(1),
		remoteAddr: gnetConn.RemoteAddr(),
		localAddr:  s.address, // gnet reports the configured address, port 0 included
	}
	if local, err := unix.Getsockname(gnetConn.Fd()); err == nil {
		if address := tcpAddress(local); address != nil {
			c.localAddr = address
		}
	}
	if c.tls != nil {
		c.tls.socket.gnetConn = gnetConn
		c.in = &c.tls.plaintext
	}
	c.touch() // before the ticker can see it
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return nil, gnet.Close
	}
	s.mu.connections[c.id] = c
	s.mu.Unlock()
	s.openConnections.Add(1)
	gnetConn.SetContext(c)
	s.metrics.connections.Inc()
	s.handler.Opened(c)
	if c.tls != nil {
		state := c.tls.conn.ConnectionState()
		s.logger.Debug("netpoll: TLS connection opened", "listener", c.listener.config.Name, "remote", c.remoteAddr,
			"version", tls.VersionName(state.Version), "principal", c.principal)
		// The client's first request may already sit in the tls.Conn's buffer, read during the
		// handshake; no socket event would announce it.
		c.scheduleWake()
	}
	return nil, gnet.None
}

func (h *eventHandler) OnTraffic(gnetConn gnet.Conn) gnet.Action {
	c, ok := gnetConn.Context().(*Conn)
	if !ok {
		return gnet.Close
	}
	return c.process()
}

func (h *eventHandler) OnClose(gnetConn gnet.Conn, err error) gnet.Action {
	c, ok := gnetConn.Context().(*Conn)
	if !ok {
		return gnet.None // refused in OnOpen
	}
	s := h.server
	if err != nil {
		s.logger.Debug("netpoll: connection closed", "remote", c.remoteAddr, "err", err)
	}
	c.closed()
	s.openConnections.Add(-1)
	s.metrics.connections.Dec()
	s.handler.Closed(c)
	s.mu.Lock()
	delete(s.mu.connections, c.id)
	s.signalDrainedLocked()
	s.mu.Unlock()
	return gnet.None
}

// gnetLogger routes gnet's logs to the server's slog.Logger.
type gnetLogger struct{ logger *slog.Logger }

func (l gnetLogger) Debugf(format string, args ...any) {
	l.logger.Debug("gnet: " + fmt.Sprintf(format, args...))
}

func (l gnetLogger) Infof(format string, args ...any) {
	l.logger.Debug("gnet: " + fmt.Sprintf(format, args...))
}

func (l gnetLogger) Warnf(format string, args ...any) {
	l.logger.Warn("gnet: " + fmt.Sprintf(format, args...))
}

func (l gnetLogger) Errorf(format string, args ...any) {
	l.logger.Error("gnet: " + fmt.Sprintf(format, args...))
}

// Fatalf logs without exiting: library code never ends the process.
func (l gnetLogger) Fatalf(format string, args ...any) {
	l.logger.Error("gnet: fatal: " + fmt.Sprintf(format, args...))
}
