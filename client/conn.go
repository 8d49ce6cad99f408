package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

// maxPendingPerConn bounds the requests written to one connection and not yet answered. A sender
// that finds it full waits: the bound pushes back instead of queueing without limit.
const maxPendingPerConn = 64

// maxResponseBytes refuses absurd response frames before allocating them.
const maxResponseBytes = 1 << 30

// clientMaxVersions caps the version this client sends of each API: the highest kmsg encodes that
// needs no topic ids. Minimums (record batch v2 needs Produce 3 and Fetch 4) are in clientMinVersions.
var clientMaxVersions = map[int16]int16{
	0:  11, // Produce (12 adds nothing we use; 13 needs topic ids)
	1:  12, // Fetch (13 needs topic ids)
	2:  7,  // ListOffsets
	3:  12, // Metadata
	8:  8,  // OffsetCommit (9 is KIP-848's; 10 needs topic ids)
	9:  7,  // OffsetFetch (8 batches groups, which a member does not need)
	10: 4,  // FindCoordinator
	11: 9,  // JoinGroup
	12: 4,  // Heartbeat
	13: 5,  // LeaveGroup
	14: 5,  // SyncGroup
	17: 1,  // SaslHandshake
	18: 3,  // ApiVersions
	19: 7,  // CreateTopics
	20: 5,  // DeleteTopics (6 names topics by id or name; 5 is enough)
	22: 4,  // InitProducerId
	24: 3,  // AddPartitionsToTxn (4+ are the brokers' batched form)
	25: 3,  // AddOffsetsToTxn
	26: 3,  // EndTxn (5 is transaction.version 2's)
	28: 3,  // TxnOffsetCommit (3 carries the member and generation)
	29: 3,  // DescribeAcls
	30: 3,  // CreateAcls
	31: 3,  // DeleteAcls
	32: 4,  // DescribeConfigs
	36: 1,  // SaslAuthenticate
	44: 1,  // IncrementalAlterConfigs
	50: 0,  // DescribeUserScramCredentials
	51: 0,  // AlterUserScramCredentials
	68: 1,  // ConsumerGroupHeartbeat (v1: the member chooses its id)
	76: 1,  // ShareGroupHeartbeat
	77: 1,  // ShareGroupDescribe
	78: 2,  // ShareFetch
	79: 2,  // ShareAcknowledge
	90: 1,  // DescribeShareGroupOffsets
}

var clientMinVersions = map[int16]int16{0: 3, 1: 4}

// brokerConn is one TCP connection to one broker. Requests are pipelined: send writes a request
// and queues its completion; the reader goroutine reads responses in the same order (Kafka answers
// in request order on a connection) and completes them.
//
// Once the connection fails, every queued and later request fails with the same ErrNetwork error;
// the pool then dials a new connection.
type brokerConn struct {
	nodeID   int32
	address  string
	netConn  net.Conn
	clientID *string
	timeout  time.Duration // added to each request's own wait to bound its response

	// versions[key] is the highest version of key both sides speak, -1 if none. Written by dial,
	// read-only afterwards.
	versions [kmsg.MaxKey + 1]int16

	// pending carries written requests to the reader, in write order.
	pending chan *pendingRequest

	write struct {
		sync.Mutex
		correlationID int32
		buffer        []byte // encoded request (or, for produce, its fields between batches)
		header        []byte // scratch for a produce request's header
	}

	closeOnce  sync.Once
	closed     chan struct{}
	err        error // set before closed is closed
	readerDone chan struct{}
}

// pendingRequest is a request written and awaiting its response.
type pendingRequest struct {
	correlationID int32
	request       kmsg.Request
	deadline      time.Time
	done          func(kmsg.Response, error)
}

// dialBroker connects to address and negotiates API versions.
func dialBroker(ctx context.Context, cfg *clientConfig, nodeID int32, address string) (*brokerConn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout)
	defer cancel()
	var dialer net.Dialer
	netConn, err := dialer.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, networkError(address, err)
	}
	if tcp, ok := netConn.(*net.TCPConn); ok {
		tcp.SetNoDelay(true)
	}
	if netConn, err = startTLS(ctx, cfg, address, netConn); err != nil {
		return nil, networkError(address, err)
	}
	clientID := cfg.clientID
	c := &brokerConn{
		nodeID:     nodeID,
		address:    address,
		netConn:    netConn,
		clientID:   &clientID,
		timeout:    cfg.requestTimeout,
		pending:    make(chan *pendingRequest, maxPendingPerConn),
		closed:     make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	// Only ApiVersions may be sent before the versions are known.
	for key := range c.versions {
		c.versions[key] = -1
	}
	c.versions[protocol.ApiVersionsKey] = clientMaxVersions[protocol.ApiVersionsKey]
	go c.readLoop()
	if err := c.negotiate(ctx); err != nil {
		c.close(err)
		return nil, err
	}
	if err := c.authenticate(ctx, cfg.sasl); err != nil { // sasl.go
		c.close(err)
		return nil, err
	}
	return c, nil
}

// negotiate asks the broker which versions it serves and records the overlap with ours. A broker
// that does not serve our ApiVersions version answers a v0 body with UNSUPPORTED_VERSION and its
// range; we then ask again at the highest version it named.
func (c *brokerConn) negotiate(ctx context.Context) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "sluice-client"
	req.ClientSoftwareVersion = "0.1.0"
	for attempt := 0; attempt < 2; attempt++ {
		resp, err := c.roundTrip(ctx, req)
		if err != nil {
			return err
		}
		versionsResp := resp.(*kmsg.ApiVersionsResponse)
		if versionsResp.ErrorCode == protocol.UnsupportedVersion.Code {
			for _, k := range versionsResp.ApiKeys {
				if k.ApiKey == protocol.ApiVersionsKey {
					c.versions[protocol.ApiVersionsKey] = min(k.MaxVersion, clientMaxVersions[protocol.ApiVersionsKey])
				}
			}
			continue
		}
		if versionsResp.ErrorCode != 0 {
			return newKafkaError("api versions", "", -1, versionsResp.ErrorCode, nil)
		}
		for _, k := range versionsResp.ApiKeys {
			ours, ok := clientMaxVersions[k.ApiKey]
			if !ok || k.ApiKey < 0 || int(k.ApiKey) >= len(c.versions) {
				continue
			}
			version := min(ours, k.MaxVersion)
			if version < k.MinVersion || version < clientMinVersions[k.ApiKey] {
				continue
			}
			c.versions[k.ApiKey] = version
		}
		return nil
	}
	return fmt.Errorf("%w: %s answers no ApiVersions version we speak", ErrUnsupported, c.address)
}

// supports reports whether the broker serves API key at a version this client speaks.
func (c *brokerConn) supports(key int16) bool { return c.versions[key] >= 0 }

// send writes req and arranges for done to be called with its response, from the reader goroutine.
// With expectResponse false (acks=0 produce) done is called once the request is written. done is
// always called exactly once. send blocks while maxPendingPerConn requests await answers.
func (c *brokerConn) send(req kmsg.Request, extraWait time.Duration, expectResponse bool, done func(kmsg.Response, error)) {
	version := c.versions[req.Key()]
	if version < 0 {
		done(nil, fmt.Errorf("%w: %s serves no version of api %d we speak", ErrUnsupported, c.address, req.Key()))
		return
	}
	req.SetVersion(version)

	c.write.Lock()
	select {
	case <-c.closed:
		c.write.Unlock()
		done(nil, c.err)
		return
	default:
	}
	c.write.correlationID++
	correlationID := c.write.correlationID
	header := protocol.RequestHeader{APIKey: req.Key(), APIVersion: version, CorrelationID: correlationID, ClientID: c.clientID}
	var frame net.Buffers
	if produce, ok := req.(*kmsg.ProduceRequest); ok && version >= 3 && version <= 11 {
		// Record batches go to the socket from where they are, not through a copy.
		c.write.header = protocol.AppendRequestHeader(c.write.header[:0], header)
		frame, c.write.buffer = appendProduceFrame(c.write.buffer, c.write.header, version, produce)
	} else {
		buffer := append(c.write.buffer[:0], 0, 0, 0, 0)
		buffer = protocol.AppendRequestHeader(buffer, header)
		buffer = req.AppendTo(buffer)
		binary.BigEndian.PutUint32(buffer, uint32(len(buffer)-4))
		c.write.buffer = buffer
		frame = net.Buffers{buffer}
	}
	if expectResponse {
		p := &pendingRequest{correlationID: correlationID, request: req, deadline: time.Now().Add(c.timeout + extraWait), done: done}
		select {
		case c.pending <- p:
		case <-c.closed:
			c.write.Unlock()
			done(nil, c.err)
			return
		}
	}
	c.netConn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := frame.WriteTo(c.netConn)
	if cap(c.write.buffer) > 4<<20 {
		c.write.buffer = nil // do not pin a huge buffer for small requests
	}
	c.write.Unlock()
	if err != nil {
		c.close(networkError(c.address, err))
		if !expectResponse {
			done(nil, c.err)
		}
		return // the pending request is failed by close
	}
	if !expectResponse {
		done(nil, nil)
	}
}

// roundTrip sends req and waits for its response or ctx.
func (c *brokerConn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	type result struct {
		resp kmsg.Response
		err  error
	}
	results := make(chan result, 1)
	extraWait := time.Duration(0)
	if deadline, ok := ctx.Deadline(); ok {
		extraWait = max(0, time.Until(deadline))
	}
	c.send(req, extraWait, true, func(resp kmsg.Response, err error) { results <- result{resp, err} })
	select {
	case r := <-results:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readLoop reads responses in order until the connection fails.
func (c *brokerConn) readLoop() {
	defer close(c.readerDone)
	reader := bufio.NewReaderSize(c.netConn, 64<<10)
	var sizeBytes [4]byte
	for {
		var p *pendingRequest
		select {
		case p = <-c.pending:
		case <-c.closed:
			return
		}
		c.netConn.SetReadDeadline(p.deadline)
		if _, err := io.ReadFull(reader, sizeBytes[:]); err != nil {
			c.failWith(p, networkError(c.address, err))
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBytes[:]))
		if size < 4 || size > maxResponseBytes {
			c.failWith(p, fmt.Errorf("%w: %s sent a response frame of %d bytes", ErrMalformed, c.address, size))
			return
		}
		frame := make([]byte, size)
		if _, err := io.ReadFull(reader, frame); err != nil {
			c.failWith(p, networkError(c.address, err))
			return
		}
		resp, err := c.decode(p, frame)
		if err != nil {
			c.failWith(p, err)
			return
		}
		p.done(resp, nil)
	}
}

func (c *brokerConn) decode(p *pendingRequest, frame []byte) (kmsg.Response, error) {
	key, version := p.request.Key(), p.request.GetVersion()
	correlationID, body, err := protocol.ParseResponse(frame, key, version)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, c.address, err)
	}
	if correlationID != p.correlationID {
		return nil, fmt.Errorf("%w: %s answered correlation id %d, expected %d", ErrMalformed, c.address, correlationID, p.correlationID)
	}
	resp := p.request.ResponseKind()
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		if key == protocol.ApiVersionsKey {
			// A broker that does not serve our version answers with a v0 body.
			resp = kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(0)
			if err0 := resp.ReadFrom(body); err0 == nil {
				return resp, nil
			}
		}
		return nil, fmt.Errorf("%w: %s: api %d v%d: %w", ErrMalformed, c.address, key, version, err)
	}
	return resp, nil
}

// failWith fails p and closes the connection with err.
func (c *brokerConn) failWith(p *pendingRequest, err error) {
	c.close(err)
	p.done(nil, c.err)
}

// close fails the connection: every pending request completes with err (the first error given).
func (c *brokerConn) close(err error) {
	c.closeOnce.Do(func() {
		if err == nil {
			err = networkError(c.address, ErrClosed)
		}
		c.err = err
		close(c.closed)
		c.netConn.Close()
	})
	// Drain what the reader will not read; the write lock keeps senders from adding more (they see
	// closed under the lock). Completions run after the lock is released: they may send elsewhere.
	var failed []*pendingRequest
	c.write.Lock()
	for drained := false; !drained; {
		select {
		case p := <-c.pending:
			failed = append(failed, p)
		default:
			drained = true
		}
	}
	c.write.Unlock()
	for _, p := range failed {
		p.done(nil, c.err)
	}
}

// alive reports whether the connection has not failed.
func (c *brokerConn) alive() bool {
	select {
	case <-c.closed:
		return false
	default:
		return true
	}
}

// shutdown closes the connection and waits for the reader goroutine.
func (c *brokerConn) shutdown() {
	c.close(networkError(c.address, ErrClosed))
	<-c.readerDone
}
