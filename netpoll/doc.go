// Package netpoll is sluice's network layer: a gnet event-loop TCP server that cuts the byte
// stream into Kafka frames and writes responses back. It knows nothing of Kafka beyond framing.
//
// # Wire format
//
// Both directions use the same framing:
//
//	offset  size  field
//	0       4     size: big-endian int32, byte count of what follows
//	4       size  frame (request or response, opaque to netpoll)
//
// A size below 0 or above Config.MaxFrameBytes closes the connection with a warning, before
// anything is allocated for it. A frame whose bytes have not all arrived waits in gnet's inbound
// buffer. Response sizes are computed by netpoll from the chunks the handler sends.
//
// # Threading
//
// Handler.Serve, Opened and Closed run on the connection's event loop and must not block.
// Serve answers through its *Responder exactly once (Send, SendThen or Skip), inline or later
// from any goroutine. Frames of one connection reach Serve one at a time, in arrival order;
// different connections may be served concurrently on different loops.
//
// # Ownership
//
// The frame passed to Serve is a fresh copy owned by the handler (gnet's read buffer is shared
// and reused). The chunks passed to Send, the memory they reference and the files they name
// belong to netpoll until the response's done callback (SendThen) runs: with nil once every
// byte has been handed to the kernel or copied into the connection's outbound buffer, or with
// ErrConnectionClosed. netpoll never closes a Chunk's File.
//
// # Invariants
//
//   - Ordering: responses leave a connection in request order, whatever order handlers finish
//     in. Each request takes a sequence number and a slot in a FIFO; the loop writes only the
//     ready prefix of that FIFO, and no byte of a later chunk or response is queued while an
//     earlier file range is waiting for the socket. Skip frees a slot without writing.
//   - Zero copy: a file chunk goes through sendfile(2) when the connection has no queued
//     output; if the socket fills (EAGAIN) or output is already queued, the rest of the range
//     is read through the page cache into a pooled buffer and queued behind it.
//   - Backpressure bounds: per connection at most MaxInFlightRequests requests and
//     MaxInFlightBytes frame bytes (or one frame, whatever its size) are handed to the handler
//     and not yet retired; across the server at most MaxServerInFlightBytes. Past a bound the
//     loop stops decoding and leaves frames in gnet's inbound buffer; retiring a response
//     re-runs the decoder (gnet only calls OnTraffic for new socket data, so completions wake
//     the loop explicitly). A connection whose buffered input exceeds
//     2*MaxInFlightBytes+MaxFrameBytes is closed. Outbound, netpoll stops queueing response
//     bytes once about MaxBufferedOutboundBytes sit in the connection's outbound buffer and
//     resumes when the socket drains.
//   - Server-wide memory bounds (bounds.go): bytes received and not yet handed to the handler
//     (partial frames, frames withheld by backpressure) stay under about
//     MaxBufferedInputBytes, and answered response bytes not yet taken by the kernel under
//     about MaxBufferedOutputBytes: past a bound the connection holding the most is closed.
//     A connection holding MaxBufferedOutboundBytes of unwritten output gets no new requests
//     decoded. Connections idle for ConnectionsMaxIdle, or with a frame partially received for
//     RequestReceiveTimeout, are closed (gnet's ticker checks).
//   - Bad input never panics and never affects other connections: it closes its own.
//   - No package-level state: any number of Servers can run in one process.
//
// # Accepting
//
// netpoll owns the listening socket and its accept loop (acceptor.go); accepted sockets are
// handed to gnet's event loops with Engine.Register (gnet itself only holds a placeholder Unix
// socket nobody can reach). Running out of descriptors (EMFILE/ENFILE) never stops the loop:
// a descriptor kept in reserve is released to accept and close the pending connections, and
// the loop backs off (up to a second). A connection accepted past Config.MaxConnections is
// closed at once. Only a listener broken for good ends the loop; then Server.Failed reports
// why and FailedSignal is closed, so the process can stop saying it is ready and exit.
//
// # Listeners and TLS
//
// A Server binds one socket per Config.Listeners entry (or Config.Address alone), each with an
// accept loop of its own; their connections share the event loops and every bound above.
// Conn.Listener tells the handler which listener and security protocol a connection came in
// on. On SSL and SASL_SSL listeners each accepted socket completes a crypto/tls handshake on a
// short-lived goroutine (at most MaxConcurrentHandshakes, each within HandshakeTimeout) before
// it is registered; from then on its event loop decrypts into a plaintext buffer that frames
// are cut from and encrypts what it writes, with no goroutine of its own (tls.go explains how
// crypto/tls is driven without blocking). Conn.TLSPeerPrincipal is the verified client
// certificate's subject as Kafka's principal. There is no kernel TLS, so file chunks on TLS
// connections are read and encrypted (never sendfile'd). A failed handshake closes only its
// socket.
//
// # Close
//
// Server.Close stops accepting (new connections are closed at once) and stops decoding new
// requests, waits for every request already handed to Serve to be answered and written, then
// closes the connections and stops the loops. When ctx ends first, the outstanding requests
// are retired with ErrConnectionClosed and Close still stops everything before returning.
// Close must not be called from a Handler method (it waits for the event loops).
// Conn.Close does the same for one connection: no further requests are decoded and the
// connection closes once the requests already served are answered and written.
//
// # Metrics
//
// Registered in Config.Metrics: sluice_net_bytes_in_total, sluice_net_bytes_out_total (bytes
// handed to the kernel or queued in gnet's outbound buffer), sluice_net_sendfile_bytes_total,
// sluice_net_copied_file_bytes_total, sluice_net_frames_rejected_total,
// sluice_net_output_parks_total (times output waited for a slow reader's socket),
// sluice_net_connections_evicted_total{reason} (connections netpoll closed or refused to protect
// the server; reasons in server.go), sluice_net_tls_handshake_failures_total and the gauge
// sluice_net_connections. On TLS connections the byte counters count plaintext. Servers sharing a set share the series; the Server accessors
// (SendfileBytes, CopiedFileBytes) are per server.
//
// # Goroutines and locks
//
// gnet.Run runs in a goroutine owned by the Server, each listener's accept loop in another
// (acceptor.go) with its TLS handshake goroutines (stopped and awaited with it),
// and a writability watcher goroutine (see watcher_linux.go) parks connections whose output
// waits for the socket; Close stops and waits for all three. gnet's ticker goroutine calls
// Server.tick. Server.mu guards the connection registry and the list of connections starved of
// server budget; Server.wakeGate keeps wakes off pollers that are shutting down. The two are
// never held together. Everything in Conn.loop is touched only by the connection's event loop.
//
// netpoll is Linux-only: it uses sendfile(2) and epoll directly. On other systems the package
// builds but Listen returns an error.
package netpoll
