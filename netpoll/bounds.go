package netpoll

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Server-wide memory bounds and connection timeouts (issue 9 item 4).
//
// Each connection publishes what it holds in two atomics, written on its event loop (and, for
// output, by Send from any goroutine) and read by the others:
//
//   - inputHeld: the footprint of gnet's inbound buffer at the end of its last pass
//     (partially received frames and complete frames withheld by backpressure, rounded up to
//     the ring's power-of-two size), plus the whole size of a large frame being assembled out
//     of it (see decode).
//   - outputHeld: header and byte-chunk bytes of responses answered and not yet written, plus
//     the bytes last seen in gnet's outbound buffer.
//
// Their sums are Server.bufferedInput and Server.bufferedOutput. When a sum passes its bound
// (Config.MaxBufferedInputBytes, MaxBufferedOutputBytes) the connection holding the most is
// evicted: marked, woken, and closed by its own event loop on its next pass, without waiting
// for its responses. Bytes of connections already marked count as freed when choosing, so
// one excess evicts one connection, not one per pass that sees it; but past the bound plus
// 1/evictionCeilingFraction of it (bytes keep arriving on other loops while a victim's loop
// gets to close it) the next biggest is evicted too. So a sum stays under about 9/8 of its
// bound, plus what the event loops take in before a victim's loop closes it: one response per
// Send for output; for input, the growth of the connections being read meanwhile, and gnet grows
// a connection's inbound ring by doubling, so one read can add as much as that ring held before
// (at most the ring a connection's unanswered bytes fill, per event loop). (A large frame whose
// assembly starts counts whole at once, so it starts only while the bound leaves room.)
//
// gnet's ticker calls Server.tick, which closes connections idle for ConnectionsMaxIdle and
// connections whose current frame has been partially received for RequestReceiveTimeout.

// evictLocked marks c to be closed at once by its event loop for reason. The first reason
// wins. Server.mu must be held, so that releaseAccounts (which takes the marks back under the
// same lock) sees them.
func (c *Conn) evictLocked(reason evictReason) {
	if c.evictMark.gone {
		return // closed for another reason; its bytes are already released
	}
	if c.evictReason.CompareAndSwap(nil, &reason) {
		c.evictMark.input, c.evictMark.output = c.inputHeld.Load(), c.outputHeld.Load()
		c.server.evictingInput.Add(c.evictMark.input)
		c.server.evictingOutput.Add(c.evictMark.output)
		c.scheduleWake()
	}
}

// forgetEvictionLocked takes back what evictLocked counted as being freed, once the
// connection's bytes are released.
func (c *Conn) forgetEvictionLocked() {
	if c.evictReason.Load() != nil {
		c.server.evictingInput.Add(-c.evictMark.input)
		c.server.evictingOutput.Add(-c.evictMark.output)
		c.evictMark.input, c.evictMark.output = 0, 0
	}
}

// evicted closes the connection if it was marked by evict; event loop only.
func (c *Conn) evicted() (gnet.Action, bool) {
	reason := c.evictReason.Load()
	if reason == nil {
		return gnet.None, false
	}
	if !c.loop.evictionCounted {
		c.loop.evictionCounted = true
		s := c.server
		s.metrics.evicted(*reason).Inc()
		s.overflowLog.Warn("netpoll: closing connection to protect the server", "reason", string(*reason),
			"remote", c.remoteAddr, "inputHeldBytes", c.inputHeld.Load(), "outputHeldBytes", c.outputHeld.Load())
	}
	return gnet.Close, true
}

// holdOutput adds delta bytes to what the connection and the server hold for output, and
// evicts the biggest holder when the server is past its bound.
func (c *Conn) holdOutput(delta int64) {
	if delta == 0 {
		return
	}
	c.outputHeld.Add(delta)
	s := c.server
	total := s.bufferedOutput.Add(delta)
	if delta > 0 {
		raisePeak(&s.peakBufferedOutput, total)
		if total > s.config.MaxBufferedOutputBytes {
			s.evictBiggest(evictOutputBytes)
		}
	}
}

// accountInput publishes the input the connection holds at the end of a pass (gnet's inbound
// buffer plus the frame being assembled, counted whole), notes whether its first frame is
// incomplete, and enforces the server-wide input bound. Event loop only.
func (c *Conn) accountInput(held int) gnet.Action {
	state := &c.loop
	s := c.server
	if delta := int64(held - state.accountedInput); delta != 0 {
		state.accountedInput = held
		c.inputHeld.Add(delta)
		total := s.bufferedInput.Add(delta)
		if delta > 0 {
			raisePeak(&s.peakBufferedInput, total)
		}
		if total > s.config.MaxBufferedInputBytes && delta > 0 {
			s.evictBiggest(evictInputBytes)
			if action, closing := c.evicted(); closing {
				return action
			}
		}
	}
	if c.partialFrame() {
		if c.partialSince.Load() == 0 || state.partialSequence != state.nextSequence {
			state.partialSequence = state.nextSequence
			c.partialSince.Store(time.Now().UnixNano())
		}
	} else if c.partialSince.Load() != 0 {
		c.partialSince.Store(0)
	}
	return gnet.None
}

// partialFrame reports whether the connection's next frame has not fully arrived.
func (c *Conn) partialFrame() bool {
	if c.loop.assembling != nil {
		return c.loop.assembled < len(c.loop.assembling)
	}
	buffered := c.in.InboundBuffered()
	if buffered == 0 {
		return false
	}
	if buffered < frameHeaderBytes {
		return true
	}
	header, err := c.in.Peek(frameHeaderBytes)
	if err != nil {
		return false
	}
	size := int64(int32(binary.BigEndian.Uint32(header)))
	return int64(buffered) < frameHeaderBytes+size
}

// accountOutbound publishes the bytes sitting in gnet's outbound buffer. While any remain it
// keeps a writability watch armed, so the pass after gnet drains them updates the count.
// Event loop only.
func (c *Conn) accountOutbound() gnet.Action {
	state := &c.loop
	outbound := c.gnetConn.OutboundBuffered()
	if delta := int64(outbound - state.accountedOutbound); delta != 0 {
		state.accountedOutbound = outbound
		c.holdOutput(delta)
	}
	if outbound > 0 && !c.writableArmed.Load() {
		c.writableArmed.Store(true)
		if err := c.server.watcher.arm(c); err != nil {
			c.writableArmed.Store(false)
			c.server.logger.Error("netpoll: closing connection: cannot watch socket writability",
				"remote", c.remoteAddr, "err", err)
			return gnet.Close
		}
	}
	return gnet.None
}

// releaseAccounts returns everything the connection held to the server; called once, when
// the connection closes. Responses still queued release their own bytes when retired.
func (c *Conn) releaseAccounts() {
	state := &c.loop
	s := c.server
	s.bufferedInput.Add(-int64(state.accountedInput))
	c.inputHeld.Add(-int64(state.accountedInput))
	state.accountedInput = 0
	c.holdOutput(-int64(state.accountedOutbound))
	state.accountedOutbound = 0
	c.partialSince.Store(0)
	s.mu.Lock()
	c.forgetEvictionLocked()
	c.evictMark.gone = true
	s.mu.Unlock()
}

// evictionCeilingFraction: while evicted connections are closing, the sums may pass their
// bound by at most 1/evictionCeilingFraction of it before more connections are evicted.
const evictionCeilingFraction = 8

func raisePeak(peak *atomic.Int64, value int64) {
	for {
		current := peak.Load()
		if value <= current || peak.CompareAndSwap(current, value) {
			return
		}
	}
}

// ringFootprint estimates the memory gnet's inbound ring buffer takes to hold buffered bytes:
// it doubles as it fills, so up to the next power of two (the old copies, garbage, are not
// counted). Counting the footprint rather than the bytes keeps a pile of small requests (a
// client pipelining without reading) from costing twice the bound.
func ringFootprint(buffered int) int {
	if buffered <= 0 {
		return 0
	}
	return 1 << bits.Len(uint(buffered-1))
}

// reserveInput raises the input the connection holds to held, if the server stays within
// MaxBufferedInputBytes; it reports whether it did. Event loop only.
func (c *Conn) reserveInput(held int) bool {
	state := &c.loop
	s := c.server
	delta := int64(held - state.accountedInput)
	for {
		current := s.bufferedInput.Load()
		if current+delta > s.config.MaxBufferedInputBytes {
			return false
		}
		if s.bufferedInput.CompareAndSwap(current, current+delta) {
			raisePeak(&s.peakBufferedInput, current+delta)
			break
		}
	}
	c.inputHeld.Add(delta)
	state.accountedInput = held
	return true
}

// makeRoomForFrame is called when a frame of frameBytes cannot be assembled within the input
// bound. If connections are already being evicted, their bytes free soon: wait. Otherwise
// the biggest other holder is evicted if it holds more than frameBytes; if none does, this
// connection is. It reports whether this connection must close. Event loop only.
func (c *Conn) makeRoomForFrame(frameBytes int64) (gnet.Action, bool) {
	s := c.server
	s.mu.Lock()
	if s.evictingInput.Load() == 0 {
		var victim *Conn
		victimHeld := frameBytes
		for _, other := range s.mu.connections {
			if held := other.inputHeld.Load(); other != c && held > victimHeld && other.evictReason.Load() == nil {
				victim, victimHeld = other, held
			}
		}
		if victim == nil {
			victim = c
		}
		victim.evictLocked(evictInputBytes)
	}
	s.mu.Unlock()
	return c.evicted()
}

// touch records activity for the idle timeout.
func (c *Conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// evictBiggest evicts the connection holding the most input (or output) unless the bytes of
// connections already being evicted bring the server back under its bound.
func (s *Server) evictBiggest(reason evictReason) {
	s.mu.Lock()
	var victim *Conn
	var victimHeld int64
	for _, c := range s.mu.connections {
		if c.evictReason.Load() != nil {
			continue
		}
		held := c.inputHeld.Load()
		if reason == evictOutputBytes {
			held = c.outputHeld.Load()
		}
		if held > victimHeld {
			victim, victimHeld = c, held
		}
	}
	total, evicting, limit := s.bufferedInput.Load(), s.evictingInput.Load(), s.config.MaxBufferedInputBytes
	if reason == evictOutputBytes {
		total, evicting, limit = s.bufferedOutput.Load(), s.evictingOutput.Load(), s.config.MaxBufferedOutputBytes
	}
	// Connections already marked free their bytes shortly; evict another only if that is not
	// enough, or if the total runs past the ceiling while they are slow to close.
	if victim != nil && (total-evicting > limit || total > limit+limit/evictionCeilingFraction) {
		victim.evictLocked(reason)
	}
	s.mu.Unlock()
}

// tick closes idle connections and connections stuck in a partial frame. It runs on gnet's
// ticker goroutine and returns the delay until the next run.
func (s *Server) tick() time.Duration {
	idle, receive := s.config.ConnectionsMaxIdle, s.config.RequestReceiveTimeout
	interval := time.Second
	for _, timeout := range []time.Duration{idle, receive} {
		if timeout > 0 {
			interval = min(interval, max(timeout/4, 5*time.Millisecond))
		}
	}
	if idle == 0 && receive == 0 {
		return interval
	}
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.mu.connections {
		if c.evictReason.Load() != nil {
			continue
		}
		if since := c.partialSince.Load(); receive > 0 && since != 0 && now-since > int64(receive) {
			c.evictLocked(evictRequestTimeout)
			continue
		}
		if idle > 0 && c.inFlightCount.Load() == 0 && c.inputHeld.Load() == 0 && c.outputHeld.Load() == 0 &&
			now-c.lastActive.Load() > int64(idle) {
			c.evictLocked(evictIdle)
		}
	}
	return interval
}
