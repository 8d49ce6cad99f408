package netproxy

import (
	"net"
	"sync"
	"time"
)

const (
	chunkBytes = 32 << 10
	// heldChunks bounds what one direction reads ahead while blocked or delayed (4 x 32 KiB).
	heldChunks = 4
)

// link is one proxied connection: inbound from the dialer, outbound to the node.
type link struct {
	network           *Network
	from, to          Peer
	service           Service
	inbound, outbound net.Conn
	done              chan struct{}
	closeOnce         sync.Once
}

// chunk is bytes read at a time; a nil data marks the sender's end.
type chunk struct {
	data   []byte
	readAt time.Time
}

func (l *link) start() {
	upstream := make(chan chunk, heldChunks)
	downstream := make(chan chunk, heldChunks)
	go l.read(l.inbound, upstream, l.from, l.to)
	go l.write(l.outbound, upstream, l.from, l.to)
	go l.read(l.outbound, downstream, l.to, l.from)
	go l.write(l.inbound, downstream, l.to, l.from)
}

func (l *link) close() { l.closeWith(false) }

// closeWith closes both sides, with an RST if reset (a dropped connection) or a FIN.
func (l *link) closeWith(resetting bool) {
	l.closeOnce.Do(func() {
		close(l.done)
		if resetting {
			reset(l.inbound)
			reset(l.outbound)
		} else {
			l.inbound.Close()
			l.outbound.Close()
		}
		l.network.mu.Lock()
		delete(l.network.mu.links, l)
		l.network.mu.Unlock()
	})
}

// read moves bytes from src (sent by sender) into out until src ends or the link closes.
func (l *link) read(src net.Conn, out chan<- chunk, sender, receiver Peer) {
	defer l.network.goroutines.Done()
	for {
		buf := make([]byte, chunkBytes)
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case out <- chunk{data: buf[:n], readAt: time.Now()}:
			case <-l.done:
				return
			}
		}
		if err != nil {
			if effect, _ := l.network.effect(sender, receiver, l.service); effect.Blocked {
				// The sender gave up while the link is cut: tear down rather than hold it forever.
				l.close()
				return
			}
			select {
			case out <- chunk{readAt: time.Now()}:
			case <-l.done:
			}
			return
		}
	}
}

// write delivers chunks to dst as the policy allows.
func (l *link) write(dst net.Conn, in <-chan chunk, sender, receiver Peer) {
	defer l.network.goroutines.Done()
	defer l.close()
	for {
		var c chunk
		select {
		case c = <-in:
		case <-l.done:
			return
		}
		effect, changed := l.network.effect(sender, receiver, l.service)
		for effect.Blocked {
			select {
			case <-changed:
			case <-l.done:
				return
			}
			effect, changed = l.network.effect(sender, receiver, l.service)
		}
		if c.data == nil {
			return // the sender's end: close both sides
		}
		if effect.Delay > 0 && !l.sleep(time.Until(c.readAt.Add(effect.Delay))) {
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
		if effect.BytesPerSecond > 0 && !l.sleep(time.Duration(float64(len(c.data))/float64(effect.BytesPerSecond)*float64(time.Second))) {
			return
		}
	}
}

// sleep waits d or until the link closes (false).
func (l *link) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-l.done:
		return false
	}
}
