package coordinator

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Forwarding carries a change method's call from a node that is not the
// controller to the one that is, over a connection to the controller's Raft
// port tagged 'F' (stream_layer.go). A connection carries one call at a
// time; each call is a request frame answered by a response frame:
//
//	+--------+-----------------------------------------------+
//	| offset | field                                         |
//	+--------+-----------------------------------------------+
//	| 0      | body length n (uint32, big-endian, <= 16 MiB) |
//	| 4..n+3 | JSON body                                     |
//	+--------+-----------------------------------------------+
//
// A request body is {"op", "timeoutMs", "args"}; a response body is
// {"result", "error": {"code", "message"}, "index"}, where index is the
// controller's last applied Raft index after the call, which the caller
// waits for locally before it returns (read-your-writes).

// maxForwardFrame bounds one frame; an offset batch of 4096 commits is
// about 600 KiB.
const maxForwardFrame = 16 << 20

// forwardDialTimeout bounds connecting to the controller; the caller's ctx
// bounds the rest.
const forwardDialTimeout = time.Second

// maxIdleForwardConnections is how many idle connections the client keeps
// per controller address.
const maxIdleForwardConnections = 4

type forwardRequest struct {
	Operation     operation       `json:"op"`
	TimeoutMillis int64           `json:"timeoutMs"`
	Args          json.RawMessage `json:"args"`
}

type forwardResponse struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
	Index  uint64          `json:"index"`
}

// encodeFrame returns body as one frame. A body over maxForwardFrame is an
// error of no class: sending it again cannot succeed, so callers must not
// retry it.
func encodeFrame(body any) ([]byte, error) {
	encoded, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("coordinator: encode forwarded frame: %w", err)
	}
	if len(encoded) > maxForwardFrame {
		return nil, fmt.Errorf("coordinator: forwarded frame of %d bytes exceeds %d", len(encoded), maxForwardFrame)
	}
	frame := make([]byte, 4, 4+len(encoded))
	binary.BigEndian.PutUint32(frame, uint32(len(encoded)))
	return append(frame, encoded...), nil
}

func writeFrame(w io.Writer, body any) error {
	frame, err := encodeFrame(body)
	if err != nil {
		return err
	}
	_, err = w.Write(frame)
	return err
}

func readFrame(r io.Reader, body any) error {
	var header [4]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return err
	}
	length := binary.BigEndian.Uint32(header[:])
	if length > maxForwardFrame {
		return fmt.Errorf("coordinator: forwarded frame of %d bytes exceeds %d", length, maxForwardFrame)
	}
	encoded := make([]byte, length)
	if _, err := io.ReadFull(r, encoded); err != nil {
		return err
	}
	if err := json.Unmarshal(encoded, body); err != nil {
		return fmt.Errorf("coordinator: decode forwarded frame: %w", err)
	}
	return nil
}

// serveForwarding answers calls on one connection until it fails, the peer
// closes it or ctx ends (the stream layer then closes the connection).
func (c *Coordinator) serveForwarding(ctx context.Context, conn net.Conn) {
	// A restarting node's port is open before its Raft runs: calls wait for it (the caller's
	// timeout bounds the wait).
	select {
	case <-c.raftStarted:
	case <-ctx.Done():
		return
	}
	reader := bufio.NewReader(conn)
	for {
		var request forwardRequest
		if err := readFrame(reader, &request); err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				c.logger.Debug("coordinator: forwarding connection ended", "remote", conn.RemoteAddr(), "error", err)
			}
			return
		}
		response := c.answerForwarded(ctx, &request)
		if err := writeFrame(conn, response); err != nil {
			return
		}
	}
}

func (c *Coordinator) answerForwarded(ctx context.Context, request *forwardRequest) *forwardResponse {
	timeout := c.config.ApplyTimeout
	if request.TimeoutMillis > 0 {
		timeout = min(timeout, time.Duration(request.TimeoutMillis)*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c.countServed(request.Operation)
	result, err := c.serveOperation(ctx, request.Operation, request.Args)
	response := &forwardResponse{Index: c.fsm.appliedIndex()}
	if err == nil {
		response.Result, err = json.Marshal(result)
	}
	if err != nil {
		response.Result = nil
		response.Error = encodeWireError(err)
	}
	return response
}

// countServed counts the forwarded calls this node has served, per operation.
func (c *Coordinator) countServed(op operation) {
	c.served.Lock()
	defer c.served.Unlock()
	c.served.counts[op]++
}

// servedCalls is how many forwarded op calls this node has served.
func (c *Coordinator) servedCalls(op operation) int64 {
	c.served.Lock()
	defer c.served.Unlock()
	return c.served.counts[op]
}

// forwardClient keeps idle forwarding connections per address.
type forwardClient struct {
	dialTimeout time.Duration
	dialTLS     *tls.Config // nil: plaintext
	mu          struct {
		sync.Mutex
		idle   map[string][]net.Conn
		closed bool
	}
}

func newForwardClient(dialTimeout time.Duration) *forwardClient {
	f := &forwardClient{dialTimeout: dialTimeout}
	f.mu.idle = map[string][]net.Conn{}
	return f
}

// roundTrip sends one request to address and reads its response. ctx must
// have a deadline; it bounds the whole exchange. A failed exchange closes
// its connection; errors wrap ErrNotLeader (the controller could not be
// reached: retriable), ErrTimeout or ErrClosed; a request too large for one
// frame fails at once with an error of no class.
func (f *forwardClient) roundTrip(ctx context.Context, address string, request *forwardRequest) (*forwardResponse, error) {
	frame, err := encodeFrame(request)
	if err != nil {
		return nil, fmt.Errorf("coordinator: forwarding %s: %w", request.Operation, err)
	}
	for {
		conn, pooled, err := f.take(ctx, address)
		if err != nil {
			return nil, err
		}
		response, err := exchange(ctx, conn, frame)
		if err == nil {
			f.put(address, conn)
			return response, nil
		}
		conn.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%w: forwarding %s to %s: %w", ErrTimeout, request.Operation, address, ctxErr)
		}
		if pooled {
			continue // the controller may have closed an idle connection: try a fresh one
		}
		return nil, fmt.Errorf("%w: forwarding %s to %s: %w", ErrNotLeader, request.Operation, address, err)
	}
}

// exchange writes a request frame and reads the response within ctx. On
// success the connection is ready for reuse.
func exchange(ctx context.Context, conn net.Conn, frame []byte) (*forwardResponse, error) {
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	// Cancellation (Close) interrupts the exchange through the deadline.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	var response forwardResponse
	_, err := conn.Write(frame)
	if err == nil {
		err = readFrame(conn, &response)
	}
	if !stop() && err == nil {
		err = ctx.Err() // the deadline was moved: the connection is not reusable
	}
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return &response, nil
}

// take returns an idle connection to address (pooled = true) or dials one.
func (f *forwardClient) take(ctx context.Context, address string) (conn net.Conn, pooled bool, err error) {
	f.mu.Lock()
	if f.mu.closed {
		f.mu.Unlock()
		return nil, false, fmt.Errorf("%w: forwarding client", ErrClosed)
	}
	if idle := f.mu.idle[address]; len(idle) > 0 {
		conn := idle[len(idle)-1]
		f.mu.idle[address] = idle[:len(idle)-1]
		f.mu.Unlock()
		return conn, true, nil
	}
	f.mu.Unlock()
	conn, err = dialTagged(ctx, address, f.dialTimeout, f.dialTLS, connectionForward)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, false, fmt.Errorf("%w: dial controller at %s: %w", ErrTimeout, address, ctxErr)
		}
		return nil, false, fmt.Errorf("%w: dial controller at %s: %w", ErrNotLeader, address, err)
	}
	return conn, false, nil
}

func (f *forwardClient) put(address string, conn net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed || len(f.mu.idle[address]) >= maxIdleForwardConnections {
		conn.Close()
		return
	}
	f.mu.idle[address] = append(f.mu.idle[address], conn)
}

// close closes the idle connections; connections in use close when their
// exchange ends.
func (f *forwardClient) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.closed = true
	for address, idle := range f.mu.idle {
		for _, conn := range idle {
			conn.Close()
		}
		delete(f.mu.idle, address)
	}
}
