package netpoll

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
)

// frameHeaderBytes is the size of the Kafka frame prefix: a big-endian int32 byte count.
const frameHeaderBytes = 4

// Conn is one client connection. RemoteAddr, LocalAddr, ID, Listener, TLSPeerPrincipal, Context,
// SetContext and Close are safe from any goroutine.
type Conn struct {
	server   *Server
	gnetConn gnet.Conn
	listener *boundListener
	// principal is "User:" and the verified client certificate's subject; empty without one.
	principal string
	// in is where frames are cut from: gnetConn, or tls.plaintext on TLS connections.
	in inboundBuffer
	// tls is nil on plaintext connections; event loop only.
	tls *tlsState

	id         uint64
	remoteAddr net.Addr
	localAddr  net.Addr
	context    atomic.Pointer[contextBox]

	// wakePending is true while a pass of process is running or queued for this connection.
	// A completion that finds it false sets it and queues a Wake; one that finds it true
	// relies on that pass. process clears it before its last look for work, so no completion
	// is missed (see process).
	wakePending atomic.Bool
	// starved is true while the connection sits in the server's list of connections waiting
	// for server-wide in-flight budget.
	starved atomic.Bool
	// writableArmed is true while the writability watcher holds a one-shot registration.
	writableArmed atomic.Bool
	// closeRequested is set by Close: stop decoding, close once answered.
	closeRequested atomic.Bool

	// What the connection holds, for the server-wide bounds and timeouts (see bounds.go).
	// Written on the event loop (outputHeld also by Send), read by any goroutine.
	inputHeld     atomic.Int64 // bytes in gnet's inbound buffer after the last pass
	outputHeld    atomic.Int64 // answered, unwritten response bytes plus outbound buffer
	inFlightCount atomic.Int64 // mirror of loop.inFlightRequests
	lastActive    atomic.Int64 // unix nanoseconds of the last byte in or response retired
	partialSince  atomic.Int64 // unix nanoseconds since the first buffered frame is incomplete; 0: none
	// evictReason is set once when the server decides to close the connection at once.
	evictReason atomic.Pointer[evictReason]
	// evictMark is what evictLocked counted as being freed, and gone is set once the
	// connection's bytes are released; guarded by Server.mu.
	evictMark struct {
		input, output int64
		gone          bool
	}

	// loop is touched only on the connection's event loop.
	loop connLoopState
}

type contextBox struct{ value any }

// connLoopState is the part of a connection owned by its event loop.
type connLoopState struct {
	// closed is set by OnClose. After it no gnet.Conn method may be called: gnet may reuse
	// the file descriptor number for another connection.
	closed bool

	nextSequence   uint64 // sequence number of the next decoded request
	retireSequence uint64 // sequence number of the next request to retire
	retiredCount   uint64 // total retired, to detect progress

	// queue holds responders in request order that have not started being written.
	queue responderQueue
	// writing is the response partly written: header and chunks before chunkIndex are out,
	// and fileWritten bytes of chunks[chunkIndex] when it is a file chunk.
	writing     *Responder
	chunkIndex  int
	fileWritten int64
	// batched holds responders whose remaining bytes all sit in iov, in request order.
	batched  []*Responder
	iov      [][]byte
	iovBytes int

	// Invariant: inFlightRequests == nextSequence - retireSequence.
	inFlightRequests int
	inFlightBytes    int

	lastInboundBuffered int  // InboundBuffered at the end of the previous pass
	watcherRegistered   bool // the socket is in the writability watcher's epoll set

	// assembling is the large frame being moved out of gnet's buffer (see decode), of which
	// assembled bytes have arrived; nil when none.
	assembling []byte
	assembled  int

	accountedInput    int    // inbound bytes published in inputHeld and Server.bufferedInput
	accountedOutbound int    // outbound-buffer bytes published in outputHeld and bufferedOutput
	partialSequence   uint64 // nextSequence when partialSince was set: identifies the frame
	evictionCounted   bool   // the eviction was logged and counted
}

// ID is unique among the server's connections for the server's lifetime.
func (c *Conn) ID() uint64 { return c.id }

// Listener names the listener the connection came in on and its security protocol
// (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL).
func (c *Conn) Listener() (name string, protocol string) {
	return c.listener.config.Name, c.listener.config.SecurityProtocol
}

// TLSPeerPrincipal is Kafka's principal for the client certificate verified in the TLS
// handshake: "User:" and the certificate's subject distinguished name in RFC 2253 form, as
// Kafka writes it ("User:CN=alice,OU=eng,O=example"). Empty on plaintext connections and when
// the client sent no certificate.
func (c *Conn) TLSPeerPrincipal() string { return c.principal }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remoteAddr }

// LocalAddr is the server-side address of the connection.
func (c *Conn) LocalAddr() net.Addr { return c.localAddr }

// Context returns what SetContext stored, or nil.
func (c *Conn) Context() any {
	if box := c.context.Load(); box != nil {
		return box.value
	}
	return nil
}

// SetContext stores the handler's per-connection state.
func (c *Conn) SetContext(value any) { c.context.Store(&contextBox{value: value}) }

// Close stops decoding requests from the connection and closes it once every request already
// handed to Serve has been answered and written. Safe from any goroutine.
func (c *Conn) Close() {
	c.closeRequested.Store(true)
	c.scheduleWake()
}

// scheduleWake makes sure a pass of process runs on the event loop after this call.
func (c *Conn) scheduleWake() {
	if c.wakePending.CompareAndSwap(false, true) {
		c.server.wake(c)
	}
}

// process is the connection's only entry point on the event loop (new bytes, completions,
// writability, budget, close). It decodes admitted frames and writes the ready prefix of
// responses until neither makes progress.
func (c *Conn) process() gnet.Action {
	state := &c.loop
	if state.closed {
		return gnet.None
	}
	if c.tls != nil {
		if err := c.tls.decrypt(); err != nil {
			// io.EOF is the client's close_notify: it closes, as a plaintext client's FIN does.
			if !errors.Is(err, io.EOF) {
				c.server.badInputLog.Warn("netpoll: closing TLS connection: bad input", "remote", c.remoteAddr, "err", err)
			}
			return gnet.Close
		}
	}
	if buffered := c.in.InboundBuffered(); buffered > state.lastInboundBuffered {
		c.server.metrics.bytesIn.Add(buffered - state.lastInboundBuffered)
		c.touch()
	}
	// While the pass runs, completions (including inline Sends from Serve) need no Wake.
	c.wakePending.Store(true)
	for {
		if action, evicted := c.evicted(); evicted {
			return action
		}
		progressed, action := c.step()
		if action != gnet.None || state.closed {
			return action
		}
		if progressed {
			continue
		}
		// Release the flag, then look once more: a completion that set its state before this
		// point is seen by the next step; one after it finds the flag false and wakes us.
		c.wakePending.Store(false)
		progressed, action = c.step()
		if action != gnet.None || state.closed {
			return action
		}
		if !progressed {
			break
		}
		c.wakePending.Store(true)
	}
	if c.draining() && state.writing == nil && state.queue.empty() && len(state.batched) == 0 {
		if c.gnetConn.OutboundBuffered() == 0 {
			return gnet.Close
		}
		if action := c.armWritable(); action != gnet.None {
			return action
		}
	}
	buffered := c.in.InboundBuffered()
	if limit := c.server.config.maxBufferedInboundBytes(); buffered+len(state.assembling) > limit {
		c.server.overflowLog.Warn("netpoll: closing connection whose unread input exceeds the limit",
			"remote", c.remoteAddr, "bufferedBytes", buffered+len(state.assembling), "limitBytes", limit)
		return gnet.Close
	}
	state.lastInboundBuffered = buffered
	if action := c.accountInput(ringFootprint(buffered) + len(state.assembling)); action != gnet.None {
		return action
	}
	// An eviction marked after the loop's last look found wakePending still set and sent no
	// Wake: catch it here (the flag was cleared before this check).
	if action, evicted := c.evicted(); evicted {
		return action
	}
	return c.accountOutbound()
}

// draining reports whether the connection must stop decoding and close once answered.
func (c *Conn) draining() bool {
	return c.closeRequested.Load() || c.server.closing.Load()
}

// step decodes what the budget admits, then writes what is ready. progressed reports whether
// a request was admitted or retired, either of which can enable the other.
func (c *Conn) step() (progressed bool, action gnet.Action) {
	admitted, action := c.decode()
	if action != gnet.None || c.loop.closed {
		return false, action
	}
	retiredBefore := c.loop.retiredCount
	if action = c.flush(); action != gnet.None {
		return false, action
	}
	return admitted || c.loop.retiredCount != retiredBefore, gnet.None
}

// Large frames are moved out of gnet's inbound ring buffer while they arrive: the ring doubles
// its capacity as it fills (each old copy left as garbage), so a partial 99 MiB frame would cost
// two to three times its size. Once a frame of at least assembleMinFrameBytes has
// assembleStartBytes buffered, a buffer of its exact size is allocated (and counted whole
// against the server-wide input bound, so only while that leaves room) and filled as bytes
// arrive.
const (
	assembleMinFrameBytes = 1 << 20
	assembleStartBytes    = 256 << 10
)

// decode hands every complete, admitted frame in the inbound buffer to the handler.
func (c *Conn) decode() (admitted bool, action gnet.Action) {
	state := &c.loop
	config := &c.server.config
	for !state.closed && !c.draining() {
		if state.assembling == nil {
			buffered := c.in.InboundBuffered()
			if buffered < frameHeaderBytes {
				return admitted, gnet.None
			}
			header, err := c.in.Peek(frameHeaderBytes)
			if err != nil {
				return admitted, gnet.None
			}
			size := int64(int32(binary.BigEndian.Uint32(header)))
			if size < 0 || size > int64(config.MaxFrameBytes) {
				c.server.metrics.framesRejected.Inc()
				c.server.badInputLog.Warn("netpoll: closing connection that sent a frame size out of range",
					"remote", c.remoteAddr, "frameBytes", size, "maxFrameBytes", config.MaxFrameBytes)
				return admitted, gnet.Close
			}
			frameBytes := int(size)
			if buffered >= frameHeaderBytes+frameBytes {
				if !c.admit(frameBytes) {
					return admitted, gnet.None // backpressure: leave the frame in gnet's buffer
				}
				_, _ = c.in.Discard(frameHeaderBytes)
				frame := make([]byte, frameBytes)
				if n, _ := c.in.Read(frame); n != frameBytes {
					panic("netpoll: inbound buffer held fewer bytes than InboundBuffered reported")
				}
				c.serve(frame)
				admitted = true
				continue
			}
			if frameBytes < assembleMinFrameBytes || buffered-frameHeaderBytes < assembleStartBytes {
				return admitted, gnet.None // truncated: wait for the rest
			}
			if !c.reserveInput(buffered - frameHeaderBytes + frameBytes) {
				// No room under the input bound: make room by evicting a bigger holder, or
				// close this connection (the newest frame) when nobody holds more.
				if action, evicted := c.makeRoomForFrame(int64(frameBytes)); evicted {
					return admitted, action
				}
				return admitted, gnet.None
			}
			_, _ = c.in.Discard(frameHeaderBytes)
			state.assembling, state.assembled = make([]byte, frameBytes), 0
		}
		if state.assembled < len(state.assembling) {
			n, _ := c.in.Read(state.assembling[state.assembled:])
			state.assembled += n
			if state.assembled < len(state.assembling) {
				return admitted, gnet.None // the rest has not arrived
			}
		}
		if !c.admit(len(state.assembling)) {
			return admitted, gnet.None // backpressure: the assembled frame waits
		}
		frame := state.assembling
		state.assembling, state.assembled = nil, 0
		c.serve(frame)
		admitted = true
	}
	return admitted, gnet.None
}

// serve hands an admitted frame to the handler with the next responder in request order.
func (c *Conn) serve(frame []byte) {
	state := &c.loop
	responder := &Responder{conn: c, sequence: state.nextSequence, frameBytes: len(frame)}
	state.nextSequence++
	state.queue.pushBack(responder)
	c.server.handler.Serve(c, frame, responder)
}

// admit reserves in-flight budget for a frame of frameBytes, or reports that it must wait.
func (c *Conn) admit(frameBytes int) bool {
	state := &c.loop
	config := &c.server.config
	if state.inFlightRequests >= config.MaxInFlightRequests {
		return false
	}
	if state.inFlightBytes > 0 && state.inFlightBytes+frameBytes > config.MaxInFlightBytes {
		return false
	}
	// A client that does not read its responses gets no new ones built: its requests wait in
	// the inbound buffer (where the server-wide input bound applies).
	if state.inFlightRequests > 0 && c.outputHeld.Load() >= int64(config.MaxBufferedOutboundBytes) {
		return false
	}
	if !c.server.reserveBudget(c, frameBytes) {
		return false
	}
	state.inFlightRequests++
	c.inFlightCount.Add(1)
	state.inFlightBytes += frameBytes
	return true
}

// retire ends a request: its slot and budget are released and its done callback runs.
func (c *Conn) retire(responder *Responder, err error) {
	state := &c.loop
	if responder.sequence != state.retireSequence {
		panic("netpoll: responses retired out of request order")
	}
	state.retireSequence++
	state.retiredCount++
	state.inFlightRequests--
	c.inFlightCount.Add(-1)
	state.inFlightBytes -= responder.frameBytes
	c.server.releaseBudget(responder.frameBytes)
	c.touch()
	if err != nil {
		// may race a late Send, so leave its fields alone
		if previous := responder.abandon(); previous == responderReady {
			c.holdOutput(-responder.heldBytes)
		}
		return
	}
	c.holdOutput(-responder.heldBytes)
	responder.finished(nil)
	// The handler may keep the Responder; let the response's memory go.
	responder.chunks, responder.done, responder.notifier = nil, nil, nil
}

// closed runs on the event loop when gnet closes the connection, possibly from inside a write
// that failed. Every outstanding request is retired with ErrConnectionClosed.
func (c *Conn) closed() {
	state := &c.loop
	if state.closed {
		return
	}
	state.closed = true
	c.server.watcher.forget(c)
	for _, responder := range state.batched {
		c.retire(responder, ErrConnectionClosed)
	}
	clear(state.batched)
	state.batched = state.batched[:0]
	if state.writing != nil {
		c.retire(state.writing, ErrConnectionClosed)
		state.writing = nil
	}
	for responder := state.queue.popFront(); responder != nil; responder = state.queue.popFront() {
		c.retire(responder, ErrConnectionClosed)
	}
	clear(state.iov)
	state.iov = state.iov[:0]
	state.assembling, state.assembled = nil, 0
	if c.tls != nil {
		c.tls.plaintext.release()
		c.tls.socket.gnetConn = nil // gnet may reuse the descriptor
	}
	c.releaseAccounts()
}

// responderQueue is a FIFO ring of responders. Its length is bounded by MaxInFlightRequests.
type responderQueue struct {
	items  []*Responder
	head   int
	length int
}

func (q *responderQueue) empty() bool { return q.length == 0 }

func (q *responderQueue) pushBack(responder *Responder) {
	if q.length == len(q.items) {
		grown := make([]*Responder, max(8, 2*len(q.items)))
		for i := range q.length {
			grown[i] = q.items[(q.head+i)%len(q.items)]
		}
		q.items, q.head = grown, 0
	}
	q.items[(q.head+q.length)%len(q.items)] = responder
	q.length++
}

func (q *responderQueue) front() *Responder {
	if q.length == 0 {
		return nil
	}
	return q.items[q.head]
}

func (q *responderQueue) popFront() *Responder {
	if q.length == 0 {
		return nil
	}
	responder := q.items[q.head]
	q.items[q.head] = nil
	q.head = (q.head + 1) % len(q.items)
	q.length--
	return responder
}
