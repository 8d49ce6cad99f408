package netpoll

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// writabilityWatcher tells stalled connections when their socket can take more bytes.
//
// gnet drains its outbound buffer on EPOLLOUT but has no hook to tell the application, so a
// connection whose output is parked (a file range waiting for the socket, or more than
// MaxBufferedOutboundBytes queued) registers its socket here, one-shot, in a second epoll set.
// When the socket turns writable the watcher wakes the connection's event loop, which sends
// the next piece (with sendfile again when gnet's buffer has drained). The same socket sitting
// in gnet's epoll set and in this one is allowed by epoll.
//
// One goroutine, owned by the Server, stopped by stop.
type writabilityWatcher struct {
	epollDescriptor int
	stopDescriptor  int // eventfd; readable means stop
	onWritable      func(connectionID uint64)
	stopped         chan struct{}
}

func newWritabilityWatcher(onWritable func(connectionID uint64)) (*writabilityWatcher, error) {
	epollDescriptor, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("netpoll: epoll_create1: %w", err)
	}
	stopDescriptor, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epollDescriptor)
		return nil, fmt.Errorf("netpoll: eventfd: %w", err)
	}
	// The stop descriptor is told apart from sockets by an all-ones id, which no connection has.
	event := unix.EpollEvent{Events: unix.EPOLLIN}
	setEventID(&event, stopEventID)
	if err := unix.EpollCtl(epollDescriptor, unix.EPOLL_CTL_ADD, stopDescriptor, &event); err != nil {
		_ = unix.Close(epollDescriptor)
		_ = unix.Close(stopDescriptor)
		return nil, fmt.Errorf("netpoll: epoll_ctl add eventfd: %w", err)
	}
	watcher := &writabilityWatcher{
		epollDescriptor: epollDescriptor,
		stopDescriptor:  stopDescriptor,
		onWritable:      onWritable,
		stopped:         make(chan struct{}),
	}
	go watcher.run()
	return watcher, nil
}

const stopEventID = ^uint64(0)

func setEventID(event *unix.EpollEvent, id uint64) {
	event.Fd = int32(uint32(id))
	event.Pad = int32(uint32(id >> 32))
}

func eventID(event *unix.EpollEvent) uint64 {
	return uint64(uint32(event.Fd)) | uint64(uint32(event.Pad))<<32
}

func (w *writabilityWatcher) run() {
	defer close(w.stopped)
	events := make([]unix.EpollEvent, 64)
	for {
		count, err := unix.EpollWait(w.epollDescriptor, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Cannot happen with a valid epoll descriptor; stalled connections would then
			// only move on other events, so keep the failure visible by exiting loudly.
			panic(fmt.Sprintf("netpoll: epoll_wait on writability watcher: %v", err))
		}
		for i := range count {
			id := eventID(&events[i])
			if id == stopEventID {
				return
			}
			w.onWritable(id)
		}
	}
}

// arm registers (or re-enables) a one-shot EPOLLOUT watch on the connection's socket.
// Event loop only.
func (w *writabilityWatcher) arm(c *Conn) error {
	event := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT}
	setEventID(&event, c.id)
	socket := c.gnetConn.Fd()
	operation, fallback := unix.EPOLL_CTL_MOD, unix.EPOLL_CTL_ADD
	if !c.loop.watcherRegistered {
		operation, fallback = unix.EPOLL_CTL_ADD, unix.EPOLL_CTL_MOD
	}
	err := unix.EpollCtl(w.epollDescriptor, operation, socket, &event)
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOENT) {
		err = unix.EpollCtl(w.epollDescriptor, fallback, socket, &event)
	}
	if err != nil {
		return fmt.Errorf("netpoll: epoll_ctl arm writability: %w", err)
	}
	c.loop.watcherRegistered = true
	return nil
}

// forget removes the connection's socket before gnet closes it. Event loop only.
func (w *writabilityWatcher) forget(c *Conn) {
	if !c.loop.watcherRegistered {
		return
	}
	c.loop.watcherRegistered = false
	_ = unix.EpollCtl(w.epollDescriptor, unix.EPOLL_CTL_DEL, c.gnetConn.Fd(), nil)
}

// stop ends the goroutine and releases the descriptors.
func (w *writabilityWatcher) stop() {
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	_, _ = unix.Write(w.stopDescriptor, one)
	<-w.stopped
	_ = unix.Close(w.epollDescriptor)
	_ = unix.Close(w.stopDescriptor)
}
