//go:build !linux

package netpoll

import "errors"

// writabilityWatcher needs epoll; elsewhere Listen fails so the rest of sluice still builds.
type writabilityWatcher struct{}

func newWritabilityWatcher(func(connectionID uint64)) (*writabilityWatcher, error) {
	return nil, errors.New("netpoll: only Linux is supported (epoll, sendfile)")
}

func (*writabilityWatcher) arm(*Conn) error { return errors.New("netpoll: unsupported platform") }
func (*writabilityWatcher) forget(*Conn)    {}
func (*writabilityWatcher) stop()           {}
