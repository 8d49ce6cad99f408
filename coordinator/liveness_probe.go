package coordinator

// Probing silent brokers. A session timeout must be long enough that a healthy broker on a busy
// machine never misses it, which makes it slow to notice a broker whose process died. But a dead
// process leaves a sign that load cannot fake: its listening socket is gone, so the kernel answers
// a connection attempt with a reset (connection refused), while a live process's kernel accepts the
// connection into the listen queue however starved the process is. So the controller dials the
// registered address of a broker it has not heard from for Config.BrokerProbeAfter, and fences it
// at once if the dial is refused. Any other outcome (accepted, timed out, unreachable network) says
// nothing, and the session timeout decides as before.
//
// A new controller starts everyone's session afresh (sessions.go), so a killed controller would
// otherwise be fenced only a full session timeout after the election. The broker that was the
// controller before this node took over (the deposed controller) has already been silent to
// Raft for an election's length, so it is probed from the first liveness check on, until it heartbeats.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// probeDue reports whether a broker should be probed: it has been silent (no heartbeat) for
// longer than probeAfter, or it is the deposed controller and has not heartbeated since this node
// took over. probeAfter 0 turns probing off.
func probeDue(silentFor, probeAfter time.Duration, deposedAndUnheard bool) bool {
	if probeAfter <= 0 {
		return false
	}
	return silentFor > probeAfter || deposedAndUnheard
}

// refusesConnections dials address and reports whether the connection was refused: nothing
// listens there, so the process that registered it is gone. A dial that succeeds, times out or
// fails otherwise reports false.
func refusesConnections(ctx context.Context, address string, timeout time.Duration) bool {
	dialer := net.Dialer{Timeout: timeout}
	conn, err := dialer.DialContext(ctx, "tcp", address)
	if err == nil {
		conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// probeBrokers dials the registered addresses of brokers at once and returns those that refused,
// waiting at most timeout.
func (c *Coordinator) probeBrokers(metadata *Metadata, brokers []int32, timeout time.Duration) []int32 {
	refused := make([]bool, len(brokers))
	var wait sync.WaitGroup
	for i, id := range brokers {
		broker := metadata.Brokers[id]
		address := net.JoinHostPort(broker.Host, strconv.Itoa(int(broker.Port)))
		wait.Add(1)
		go func() {
			defer wait.Done()
			refused[i] = refusesConnections(c.closing, address, timeout)
		}()
	}
	wait.Wait()
	c.metrics.brokerProbes.Add(len(brokers))
	var out []int32
	for i, id := range brokers {
		if refused[i] {
			out = append(out, id)
		}
	}
	return out
}

// recordDeposed notes, as this node takes over as controller, the controller it knew before
// (-1 for none).
func (c *Coordinator) recordDeposed(previous int32) {
	if previous == c.config.NodeID {
		previous = -1
	}
	c.liveness.mu.Lock()
	c.liveness.deposed = previous
	c.liveness.mu.Unlock()
}
