package netpoll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
)

// ErrConnectionClosed is passed to a response's done callback when the connection closed before
// the response was written.
var ErrConnectionClosed = errors.New("netpoll: connection closed")

// Chunk is one piece of a response. A response is its chunks written back to back, preceded by
// a 4-byte big-endian size that netpoll computes.
type Chunk struct {
	// Bytes is written as is when File is nil.
	Bytes []byte

	// File, when non-nil, makes this chunk the byte range [FileOffset, FileOffset+FileLength)
	// of the file. It is sent with sendfile(2) when the socket can take it directly, otherwise
	// read through the page cache. The file must stay open and the range must stay readable
	// until the response's done callback runs; a range that turns out shorter than FileLength
	// closes the connection (the size prefix already promised the bytes).
	File       *os.File
	FileOffset int64
	FileLength int64
}

// length is the number of bytes the chunk contributes to the response.
func (c Chunk) length() int64 {
	if c.File != nil {
		return c.FileLength
	}
	return int64(len(c.Bytes))
}

// responderState is the lifecycle of a Responder. Transitions:
//
//	pending --Send--> ready      --loop writes it--> (retired)
//	pending --Skip--> skipped    --loop reaches it--> (retired)
//	pending --connection closes--> abandoned (a later Send/Skip only runs its done callback)
//	ready   --connection closes--> abandoned (the loop runs the done callback)
type responderState uint32

const (
	responderPending responderState = iota
	responderReady
	responderSkipped
	responderAbandoned
)

// Responder answers one request. Exactly one of Send, SendThen or Skip must be called, once,
// from any goroutine. Until then the request holds its ordering slot and its share of the
// connection's and the server's in-flight budget, and later responses on the connection wait.
type Responder struct {
	conn       *Conn
	sequence   uint64 // position of the request on its connection, from 0
	frameBytes int    // in-flight budget held until the responder is retired

	used  atomic.Bool   // set by the first Send/Skip; a second call is a handler bug
	state atomic.Uint32 // responderState

	// Written by Send before the pending->ready transition and read by the event loop only
	// after observing ready, so they need no lock.
	chunks  []Chunk
	done    func(error)
	invalid error // response the loop must refuse to write (bad chunk, too large)
	header  [frameHeaderBytes]byte
	// heldBytes is the memory the response holds until written (header and byte chunks),
	// counted in the connection's outputHeld from Send to retirement.
	heldBytes int64
	// notifier is SendNotify's callback, called where done would be.
	notifier Notifier
}

// Send queues the response made of chunks. It is safe from any goroutine and does not block.
// The chunks slice and the memory its Bytes reference must not be modified until the response
// is written; use SendThen to learn when that is.
func (r *Responder) Send(chunks ...Chunk) {
	r.SendThen(nil, chunks...)
}

// SendThen is Send with a callback. done runs exactly once: with nil when every byte of the
// response has been handed to the kernel or copied into netpoll's outbound buffer (the chunks
// and files are no longer needed), or with ErrConnectionClosed when the connection closed
// first. It runs on the connection's event loop, or on the calling goroutine when the
// connection is already closed, so it must not block.
func (r *Responder) SendThen(done func(error), chunks ...Chunk) {
	r.send(done, nil, chunks)
}

// Notifier is told, like SendThen's done callback, when a response sent with SendNotify is
// written or its connection closed first.
type Notifier interface{ ResponseDone(err error) }

// SendNotify is SendThen with the callback as an interface: a handler's per-request value (a
// pointer) can take the call without a closure being allocated for each response.
func (r *Responder) SendNotify(n Notifier, chunks ...Chunk) {
	r.send(nil, n, chunks)
}

func (r *Responder) send(done func(error), notifier Notifier, chunks []Chunk) {
	if r.used.Swap(true) {
		panic("netpoll: Responder answered twice (exactly one Send or Skip per request)")
	}
	var total int64
	held := int64(frameHeaderBytes)
	for i, chunk := range chunks {
		if chunk.File == nil {
			held += int64(len(chunk.Bytes))
		}
		if chunk.File != nil && (chunk.FileOffset < 0 || chunk.FileLength < 0) {
			r.invalid = fmt.Errorf("netpoll: response chunk %d has file range offset %d length %d",
				i, chunk.FileOffset, chunk.FileLength)
		}
		total += chunk.length()
	}
	if total > math.MaxInt32 && r.invalid == nil {
		r.invalid = fmt.Errorf("netpoll: response of %d bytes exceeds the 4-byte size prefix", total)
	}
	binary.BigEndian.PutUint32(r.header[:], uint32(total))
	r.chunks = chunks
	r.done, r.notifier = done, notifier
	r.heldBytes = held
	r.conn.holdOutput(held) // before the response is visible to the loop, which releases it
	if r.state.CompareAndSwap(uint32(responderPending), uint32(responderReady)) {
		r.conn.scheduleWake()
		return
	}
	r.conn.holdOutput(-held)
	// The connection closed first: nobody will write this response.
	r.finished(ErrConnectionClosed)
}

// finished runs the response's done callback or notifier, if it has one.
func (r *Responder) finished(err error) {
	switch {
	case r.done != nil:
		r.done(err)
	case r.notifier != nil:
		r.notifier.ResponseDone(err)
	}
}

// Skip answers the request with no bytes at all (Kafka produce with acks=0). It still releases
// the request's ordering slot and budget. Safe from any goroutine.
func (r *Responder) Skip() {
	if r.used.Swap(true) {
		panic("netpoll: Responder answered twice (exactly one Send or Skip per request)")
	}
	if r.state.CompareAndSwap(uint32(responderPending), uint32(responderSkipped)) {
		r.conn.scheduleWake()
	}
}

// abandon marks the responder dead because its connection closed and runs its done callback
// if the response had already been sent. It returns the state before. Event loop only.
func (r *Responder) abandon() responderState {
	previous := responderState(r.state.Swap(uint32(responderAbandoned)))
	if previous == responderReady {
		r.finished(ErrConnectionClosed)
	}
	return previous
}
