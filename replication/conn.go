package replication

// conn is a follower's connection to one leader: Kafka requests out (encoded by kmsg), responses
// back in request order. Writes come from the fetcher's goroutine only; a reader goroutine hands
// each response to the fetcher through a channel.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponseBytes bounds one response read from a leader.
const maxResponseBytes = 256 << 20

type response struct {
	correlationID int32
	body          []byte // after the response header
	buf           []byte // the whole read buffer holding body: handed back with conn.recycle
	err           error
}

// A connection keeps up to freeBuffers response buffers of at most maxFreeBufferBytes for reuse.
// The fetcher handles one response at a time and hands its buffer back before the next, so two
// cover the steady state; reusing them spares allocating and zeroing a buffer per response, and
// the bound keeps a catch-up's big responses from staying allocated.
const (
	freeBuffers        = 2
	maxFreeBufferBytes = 4 << 20
)

type conn struct {
	net       net.Conn
	formatter *kmsg.RequestFormatter
	writeBuf  []byte
	next      int32
	responses chan response
	free      chan []byte   // response buffers the fetcher is done with
	done      chan struct{} // closed when the reader exits
}

func dialLeader(address string, nodeID int32, timeout time.Duration, tlsConfig *tls.Config, authenticate func(net.Conn) error) (*conn, error) {
	var nc net.Conn
	var err error
	if tlsConfig != nil {
		// The timeout covers the handshake too.
		dialer := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: tlsConfig}
		nc, err = dialer.DialContext(context.Background(), "tcp", address)
	} else {
		nc, err = net.DialTimeout("tcp", address, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("replication: dial leader at %s: %w", address, err)
	}
	if authenticate != nil {
		nc.SetDeadline(time.Now().Add(timeout))
		if err := authenticate(nc); err != nil {
			nc.Close()
			return nil, fmt.Errorf("replication: authenticate to leader at %s: %w", address, err)
		}
		nc.SetDeadline(time.Time{})
	}
	c := &conn{
		net:       nc,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("sluice-replica-%d", nodeID))),
		responses: make(chan response, 16),
		free:      make(chan []byte, freeBuffers),
		done:      make(chan struct{}),
	}
	go c.read()
	return c, nil
}

// send writes one request and returns its correlation id.
func (c *conn) send(req kmsg.Request) (int32, error) {
	id := c.next
	c.next++
	c.writeBuf = c.formatter.AppendRequest(c.writeBuf[:0], req, id)
	c.net.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.net.Write(c.writeBuf); err != nil {
		return 0, fmt.Errorf("replication: send %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return id, nil
}

// read delivers responses until the connection fails; flexible response headers only (every
// request the fetcher sends is at a flexible version).
func (c *conn) read() {
	defer close(c.done)
	r := bufio.NewReaderSize(c.net, 64<<10)
	var size [4]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			c.responses <- response{err: fmt.Errorf("replication: read response: %w", err)}
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 5 || n > maxResponseBytes {
			c.responses <- response{err: fmt.Errorf("replication: response of %d bytes", n)}
			return
		}
		body := c.buffer(int(n))
		if _, err := io.ReadFull(r, body); err != nil {
			c.responses <- response{err: fmt.Errorf("replication: read response: %w", err)}
			return
		}
		id := int32(binary.BigEndian.Uint32(body))
		rest, err := skipTags(body[4:])
		c.responses <- response{correlationID: id, body: rest, buf: body, err: err}
		if err != nil {
			return
		}
	}
}

// buffer returns n bytes to read a response into: a recycled buffer when one is big enough.
func (c *conn) buffer(n int) []byte {
	select {
	case b := <-c.free:
		if cap(b) >= n {
			return b[:n]
		}
	default:
	}
	return make([]byte, n, max(n, 64<<10))
}

// recycle hands back a response's buffer once nothing refers to its bytes any more.
func (c *conn) recycle(buf []byte) {
	if buf == nil || cap(buf) > maxFreeBufferBytes {
		return
	}
	select {
	case c.free <- buf:
	default:
	}
}

func (c *conn) close() {
	c.net.Close()
	// Drain so the reader can exit.
	for {
		select {
		case <-c.done:
			return
		case <-c.responses:
		}
	}
}

// skipTags skips a tagged-field section (uvarint count, then per field uvarint tag, uvarint size
// and the bytes).
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("replication: bad response header tags")
	}
	b = b[n:]
	for range count {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("replication: bad response header tags")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, errors.New("replication: bad response header tags")
		}
		b = b[n+int(size):]
	}
	return b, nil
}
