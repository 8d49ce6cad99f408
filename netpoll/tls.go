package netpoll

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"io"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// TLS on the event loops.
//
// A TLS listener's accept loop hands each accepted socket to a short-lived handshake goroutine
// (at most Config.MaxConcurrentHandshakes at once, each bounded by Config.HandshakeTimeout;
// when all slots are taken the accept loop waits, leaving new connections in the kernel's
// backlog). The handshake runs with crypto/tls on the blocking socket. Once it succeeds the
// socket is registered with gnet like a plaintext one, and from then on the connection's
// event loop drives the same tls.Conn without any goroutine of its own:
//
//   - tlsSocket is the net.Conn under the tls.Conn. During the handshake it is the accepted
//     *net.TCPConn. Afterwards Read serves the bytes gnet has buffered and, when there are
//     none, returns errWouldBlock, a net.Error whose Temporary() is true. crypto/tls
//     (conn.go, readRecordOrCCS and readFromUntil) leaves its input state intact on such an
//     error: a partly received record stays in its raw input buffer and the next Read resumes
//     it. So each pass of the loop decrypts every whole record received into the connection's
//     plaintext buffer (tlsInbound) and stops at the first errWouldBlock; frames are cut from
//     that buffer exactly as from gnet's buffer on a plaintext connection.
//   - Writes go through tls.Conn.Write, whose records the socket hands to gnet.Conn.Write (the
//     socket, or gnet's outbound buffer when the socket is full), on the event loop only.
//   - Bytes the client sent right behind its last handshake message may already sit in the
//     tls.Conn's buffer when the connection is registered, so OnOpen schedules one pass.
//
// Zero copy: kernel TLS (kTLS) would let sendfile(2) work on TLS sockets, but the "tls" upper
// layer protocol is not available on the kernels sluice is run on here (tcp_available_ulp
// lists only mptcp), so a file chunk on a TLS connection is read through the page cache into a
// pooled buffer and encrypted (write.go, writeFileChunk); sluice_net_sendfile_bytes_total
// does not grow for TLS connections and sluice_net_copied_file_bytes_total does.
//
// A failed handshake (a plaintext client on a TLS port, an untrusted or expired client
// certificate, a timeout) closes that socket, counts sluice_net_tls_handshake_failures_total
// and logs one rate-limited line; other connections are not affected.

// errWouldBlock is what tlsSocket.Read returns when gnet holds no more received bytes.
var errWouldBlock net.Error = wouldBlockError{}

type wouldBlockError struct{}

func (wouldBlockError) Error() string   { return "netpoll: no TLS input buffered" }
func (wouldBlockError) Timeout() bool   { return false }
func (wouldBlockError) Temporary() bool { return true } // crypto/tls keeps its state on this

// tlsSocket is the transport under a server-side tls.Conn: the blocking socket during the
// handshake (raw), gnet's buffers afterwards (gnetConn, set in OnOpen on the event loop).
type tlsSocket struct {
	raw      *net.TCPConn
	gnetConn gnet.Conn
	local    net.Addr
	remote   net.Addr
	// gathered, when not nil, collects the records of one Conn.write, so that a response's
	// records reach gnet (and the socket) in one write instead of one each (see Conn.write).
	gathered *[]byte
}

func (s *tlsSocket) Read(p []byte) (int, error) {
	if s.raw != nil {
		return s.raw.Read(p)
	}
	if s.gnetConn == nil || s.gnetConn.InboundBuffered() == 0 {
		return 0, errWouldBlock
	}
	return s.gnetConn.Read(p)
}

func (s *tlsSocket) Write(p []byte) (int, error) {
	if s.raw != nil {
		return s.raw.Write(p)
	}
	if s.gnetConn == nil {
		return 0, net.ErrClosed
	}
	if s.gathered != nil {
		*s.gathered = append(*s.gathered, p...)
		return len(p), nil
	}
	return s.gnetConn.Write(p)
}

// Close only affects the handshake phase: afterwards gnet owns the socket.
func (s *tlsSocket) Close() error {
	if s.raw != nil {
		return s.raw.Close()
	}
	return nil
}

func (s *tlsSocket) LocalAddr() net.Addr  { return s.local }
func (s *tlsSocket) RemoteAddr() net.Addr { return s.remote }

func (s *tlsSocket) SetDeadline(t time.Time) error {
	if s.raw != nil {
		return s.raw.SetDeadline(t)
	}
	return nil
}

func (s *tlsSocket) SetReadDeadline(t time.Time) error {
	if s.raw != nil {
		return s.raw.SetReadDeadline(t)
	}
	return nil
}

func (s *tlsSocket) SetWriteDeadline(t time.Time) error {
	if s.raw != nil {
		return s.raw.SetWriteDeadline(t)
	}
	return nil
}

// tlsState is a TLS connection's part of Conn, touched only on its event loop.
type tlsState struct {
	conn      *tls.Conn
	socket    *tlsSocket
	plaintext tlsInbound
}

// tlsReadChunk is the free space made before each decrypting Read: one maximal TLS record.
const tlsReadChunk = 16<<10 + 256

// decrypt moves every whole record gnet has received into the plaintext buffer. It returns
// an error when the connection must close (bad record, alert, close_notify).
func (t *tlsState) decrypt() error {
	for {
		space := t.plaintext.reserve(tlsReadChunk)
		n, err := t.conn.Read(space)
		t.plaintext.commit(n)
		if err == nil {
			continue
		}
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Temporary() && !errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}

// tlsInbound is a connection's decrypted input, read by decode as gnet's inbound buffer is
// on plaintext connections. Invariant: start <= len(data).
type tlsInbound struct {
	data  []byte
	start int
}

func (b *tlsInbound) InboundBuffered() int { return len(b.data) - b.start }

func (b *tlsInbound) Peek(n int) ([]byte, error) {
	if n > b.InboundBuffered() {
		return nil, io.ErrShortBuffer
	}
	return b.data[b.start : b.start+n], nil
}

func (b *tlsInbound) Discard(n int) (int, error) {
	n = min(n, b.InboundBuffered())
	b.start += n
	b.compactIfEmpty()
	return n, nil
}

func (b *tlsInbound) Read(p []byte) (int, error) {
	n := copy(p, b.data[b.start:])
	b.start += n
	b.compactIfEmpty()
	return n, nil
}

func (b *tlsInbound) compactIfEmpty() {
	if b.start == len(b.data) {
		b.data, b.start = b.data[:0], 0
		if cap(b.data) > 4*tlsReadChunk {
			b.data = nil // let a burst's buffer go
		}
	}
}

// reserve returns at least n bytes of free space after the buffered bytes.
func (b *tlsInbound) reserve(n int) []byte {
	if cap(b.data)-len(b.data) < n {
		buffered := len(b.data) - b.start
		if b.start > 0 && cap(b.data)-buffered >= n && b.start >= buffered {
			copy(b.data, b.data[b.start:])
			b.data, b.start = b.data[:buffered], 0
		} else {
			grown := make([]byte, buffered, max(2*cap(b.data), buffered+n))
			copy(grown, b.data[b.start:])
			b.data, b.start = grown, 0
		}
	}
	return b.data[len(b.data) : len(b.data)+n]
}

func (b *tlsInbound) commit(n int) { b.data = b.data[:len(b.data)+n] }

// release drops the buffer (connection closed).
func (b *tlsInbound) release() { b.data, b.start = nil, 0 }

// inboundBuffer is where decode reads frames from: gnet's inbound buffer on plaintext
// connections, the decrypted bytes on TLS ones.
type inboundBuffer interface {
	InboundBuffered() int
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	Read(p []byte) (int, error)
}

// pendingConn travels with a socket from the accept loop to OnOpen.
type pendingConn struct {
	listener *boundListener
	tls      *tlsState // nil on plaintext listeners
	// principal is "User:" and the client certificate's subject, or empty.
	principal string
}

// handshake runs a TLS handshake on raw and registers the connection with gnet once it
// succeeds; on failure it closes raw, counts and logs. It runs on its own goroutine.
func (a *acceptor) handshake(ctx context.Context, raw *net.TCPConn) {
	s := a.server
	socket := &tlsSocket{raw: raw, local: raw.LocalAddr(), remote: raw.RemoteAddr()}
	conn := tls.Server(socket, a.listener.config.TLS)
	ctx, cancel := context.WithTimeout(ctx, s.config.HandshakeTimeout)
	defer cancel()
	_ = raw.SetDeadline(time.Now().Add(s.config.HandshakeTimeout))
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		s.metrics.tlsHandshakeFailures.Inc()
		s.tlsLog.Warn("netpoll: TLS handshake failed; connection closed", "listener", a.listener.config.Name,
			"remote", raw.RemoteAddr(), "err", err)
		return
	}
	_ = raw.SetDeadline(time.Time{})
	// From here the tls.Conn must not touch raw: gnet duplicates its descriptor and closes it.
	socket.raw = nil
	state := &tlsState{conn: conn, socket: socket}
	a.register(raw, &pendingConn{listener: a.listener, tls: state, principal: peerPrincipal(conn.ConnectionState())})
}

// peerPrincipal is Kafka's principal for a verified client certificate: "User:" and the
// subject in RFC 2253 form (most specific first, as Java's X500Principal.getName() writes it,
// e.g. "User:CN=alice,OU=eng,O=example"). Empty when the client sent no certificate.
func peerPrincipal(state tls.ConnectionState) string {
	if len(state.PeerCertificates) == 0 {
		return ""
	}
	return "User:" + subjectName(state.PeerCertificates[0])
}

// subjectName renders the certificate's subject from its raw encoding, keeping the order and
// attributes the certificate has (pkix.Name would reorder them).
func subjectName(certificate *x509.Certificate) string {
	var sequence pkix.RDNSequence
	if rest, err := asn1.Unmarshal(certificate.RawSubject, &sequence); err != nil || len(rest) > 0 {
		return certificate.Subject.String()
	}
	return sequence.String()
}
