package netpoll

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

const (
	// maxBatchVectors keeps a writev under the kernel's IOV_MAX (1024).
	maxBatchVectors = 512
	// maxBatchBytes bounds how much is gathered before a writev.
	maxBatchBytes = 256 << 10
	// copyBufferBytes is the size of the pooled buffers file ranges are read into when they
	// cannot go through sendfile.
	copyBufferBytes = 256 << 10
	// maxSendfileBytes stays under Linux's per-call limit of 0x7ffff000.
	maxSendfileBytes = 1 << 30
)

// flush writes the ready prefix of responses in request order. It gathers the header and byte
// chunks of consecutive ready responses into one writev, sends file chunks with sendfile when
// nothing is queued ahead of them, and stops (arming the writability watcher) when the
// connection's outbound buffer is past MaxBufferedOutboundBytes. Event loop only.
func (c *Conn) flush() gnet.Action {
	state := &c.loop
	highWater := c.server.config.MaxBufferedOutboundBytes
	for !state.closed {
		if state.writing == nil {
			next := state.queue.front()
			if next == nil {
				break
			}
			switch responderState(next.state.Load()) {
			case responderPending:
				return c.writeBatch()
			case responderSkipped:
				state.batched = append(state.batched, state.queue.popFront())
				continue
			}
			if next.invalid != nil {
				if action := c.writeBatch(); action != gnet.None || state.closed {
					return action // earlier responses go out before the connection closes
				}
				c.server.logger.Error("netpoll: closing connection: handler sent an invalid response",
					"remote", c.remoteAddr, "err", next.invalid)
				return gnet.Close
			}
			if state.iovBytes+c.gnetConn.OutboundBuffered() >= highWater {
				if action := c.writeBatch(); action != gnet.None || state.closed {
					return action
				}
				if c.gnetConn.OutboundBuffered() >= highWater {
					return c.armWritable()
				}
			}
			state.writing = state.queue.popFront()
			state.chunkIndex, state.fileWritten = 0, 0
			state.iov = append(state.iov, state.writing.header[:])
			state.iovBytes += frameHeaderBytes
		}
		response := state.writing
		for state.chunkIndex < len(response.chunks) {
			chunk := &response.chunks[state.chunkIndex]
			if chunk.File == nil {
				if len(chunk.Bytes) > 0 {
					state.iov = append(state.iov, chunk.Bytes)
					state.iovBytes += len(chunk.Bytes)
				}
				state.chunkIndex++
				if len(state.iov) >= maxBatchVectors || state.iovBytes >= maxBatchBytes {
					if action := c.writeBatch(); action != gnet.None || state.closed {
						return action
					}
				}
				continue
			}
			// Bytes gathered so far go first; the file range follows them.
			if action := c.writeBatch(); action != gnet.None || state.closed {
				return action
			}
			complete, action := c.writeFileChunk(chunk)
			if action != gnet.None || state.closed {
				return action
			}
			if !complete {
				return c.armWritable()
			}
			state.chunkIndex++
			state.fileWritten = 0
		}
		state.batched = append(state.batched, response)
		state.writing = nil
	}
	return c.writeBatch()
}

// writeBatch hands the gathered vectors to gnet, which writes what the socket takes and copies
// the rest into its outbound buffer, then retires the responders they completed.
func (c *Conn) writeBatch() gnet.Action {
	state := &c.loop
	if len(state.iov) > 0 {
		written := state.iovBytes
		err := c.writev(state.iov)
		if state.closed {
			return gnet.None // gnet closed the connection inside Writev; closed() cleaned up
		}
		clear(state.iov)
		state.iov, state.iovBytes = state.iov[:0], 0
		if err != nil {
			c.server.logger.Debug("netpoll: write failed", "remote", c.remoteAddr, "err", err)
			return gnet.Close
		}
		c.server.metrics.bytesOut.Add(written)
	}
	for i, responder := range state.batched {
		state.batched[i] = nil
		c.retire(responder, nil)
	}
	state.batched = state.batched[:0]
	return gnet.None
}

// writeFileChunk sends what remains of a file chunk. With nothing queued in the outbound
// buffer it uses sendfile; when the socket is full (EAGAIN) or bytes are already queued, it
// reads the range into a pooled buffer and queues a copy, up to MaxBufferedOutboundBytes.
// complete is false when the chunk must wait for the socket to drain.
func (c *Conn) writeFileChunk(chunk *Chunk) (complete bool, action gnet.Action) {
	state := &c.loop
	highWater := c.server.config.MaxBufferedOutboundBytes
	// kTLS is not available (see tls.go): TLS connections copy and encrypt file ranges.
	sendfileWorks := c.tls == nil
	for state.fileWritten < chunk.FileLength {
		remaining := chunk.FileLength - state.fileWritten
		position := chunk.FileOffset + state.fileWritten
		if sendfileWorks && c.gnetConn.OutboundBuffered() == 0 {
			sent, err := c.sendfile(chunk.File, position, remaining)
			if sent > 0 {
				state.fileWritten += sent
				c.server.metrics.sendfileBytes.Add(int(sent))
				c.server.metrics.bytesOut.Add(int(sent))
				c.server.sendfileBytes.Add(uint64(sent))
			}
			switch {
			case err == nil && sent == 0:
				return false, c.failFile(chunk, io.ErrUnexpectedEOF)
			case err == nil, errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.EAGAIN):
				// The socket is full: queue a copy of the next piece behind it.
			case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
				sendfileWorks = false // this file cannot be sendfile'd; copy it
			case errors.Is(err, os.ErrClosed):
				return false, c.failFile(chunk, err)
			default:
				c.server.logger.Debug("netpoll: sendfile failed", "remote", c.remoteAddr, "err", err)
				return false, gnet.Close
			}
		}
		if c.gnetConn.OutboundBuffered() >= highWater {
			return false, gnet.None
		}
		copied, action := c.copyFileRange(chunk, position, remaining)
		if action != gnet.None || state.closed {
			return false, action
		}
		state.fileWritten += copied
	}
	return true, gnet.None
}

// copyFileRange reads up to one pooled buffer of the file range and queues it on the
// connection.
func (c *Conn) copyFileRange(chunk *Chunk, position, remaining int64) (int64, gnet.Action) {
	buffer := c.server.copyBuffers.Get().(*[]byte)
	defer c.server.copyBuffers.Put(buffer)
	piece := (*buffer)[:min(int64(len(*buffer)), remaining)]
	read, err := chunk.File.ReadAt(piece, position)
	if read == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, c.failFile(chunk, err)
	}
	writeErr := c.write(piece[:read])
	if c.loop.closed {
		return 0, gnet.None
	}
	if writeErr != nil {
		c.server.logger.Debug("netpoll: write failed", "remote", c.remoteAddr, "err", writeErr)
		return 0, gnet.Close
	}
	c.server.metrics.copiedFileBytes.Add(read)
	c.server.metrics.bytesOut.Add(read)
	c.server.copiedFileBytes.Add(uint64(read))
	return int64(read), gnet.None
}

// writev hands vectors to gnet, through TLS on TLS connections (gathered into
// one buffer first, so small vectors do not each become a record).
func (c *Conn) writev(vectors [][]byte) error {
	if c.tls == nil {
		_, err := c.gnetConn.Writev(vectors)
		return err
	}
	if len(vectors) == 1 {
		return c.write(vectors[0])
	}
	buffer := c.server.copyBuffers.Get().(*[]byte)
	defer c.server.copyBuffers.Put(buffer)
	gathered := (*buffer)[:0]
	for _, vector := range vectors {
		for len(vector) > 0 {
			n := min(len(vector), cap(gathered)-len(gathered))
			gathered = append(gathered, vector[:n]...)
			vector = vector[n:]
			if len(gathered) == cap(gathered) {
				if err := c.write(gathered); err != nil {
					return err
				}
				gathered = gathered[:0]
			}
		}
	}
	if len(gathered) > 0 {
		return c.write(gathered)
	}
	return nil
}

// write hands p to gnet, encrypted on TLS connections.
func (c *Conn) write(p []byte) error {
	if c.tls == nil {
		_, err := c.gnetConn.Write(p)
		return err
	}
	if c.loop.closed {
		return ErrConnectionClosed
	}
	gathered := c.server.tlsRecords.Get().(*[]byte)
	defer c.server.tlsRecords.Put(gathered)
	*gathered = (*gathered)[:0]
	c.tls.socket.gathered = gathered
	_, err := c.tls.conn.Write(p)
	c.tls.socket.gathered = nil
	if len(*gathered) > 0 {
		if _, writeErr := c.gnetConn.Write(*gathered); err == nil {
			err = writeErr
		}
	}
	return err
}

// failFile closes the connection: the size prefix promised bytes the file cannot supply.
func (c *Conn) failFile(chunk *Chunk, err error) gnet.Action {
	c.server.logger.Error("netpoll: closing connection: response file range unreadable",
		"remote", c.remoteAddr, "file", chunk.File.Name(), "offset", chunk.FileOffset,
		"length", chunk.FileLength, "written", c.loop.fileWritten, "err", err)
	return gnet.Close
}

// sendfile copies up to remaining bytes of file at position to the socket inside the kernel.
func (c *Conn) sendfile(file *os.File, position, remaining int64) (int64, error) {
	raw, err := file.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("netpoll: sendfile: %w", err)
	}
	var sent int
	var sendErr error
	socket := c.gnetConn.Fd()
	controlErr := raw.Control(func(fileDescriptor uintptr) {
		offset := position
		sent, sendErr = unix.Sendfile(socket, int(fileDescriptor), &offset, int(min(remaining, maxSendfileBytes)))
	})
	if controlErr != nil {
		return 0, fmt.Errorf("netpoll: sendfile: %w", controlErr)
	}
	if sent < 0 {
		sent = 0
	}
	return int64(sent), sendErr
}

// armWritable asks the writability watcher to wake the connection when its socket can take
// more bytes. Called when output is stalled behind MaxBufferedOutboundBytes or a full socket.
func (c *Conn) armWritable() gnet.Action {
	if c.writableArmed.Load() {
		return gnet.None
	}
	c.writableArmed.Store(true)
	c.server.metrics.outputParks.Inc()
	if err := c.server.watcher.arm(c); err != nil {
		c.writableArmed.Store(false)
		c.server.logger.Error("netpoll: closing connection: cannot watch socket writability",
			"remote", c.remoteAddr, "err", err)
		return gnet.Close
	}
	return gnet.None
}
