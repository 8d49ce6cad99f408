package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
)

// view publishes Metadata snapshots: the FSM's replicated state plus the
// current controller id. It is the only place snapshots are composed, so
// subscribers see them in one order.
type view struct {
	// current is the latest published snapshot; never nil.
	current atomic.Pointer[Metadata]

	mu struct {
		sync.Mutex
		state        *Metadata // latest FSM state
		controllerID int32
		// changed is closed and replaced on every publish.
		changed       chan struct{}
		subscriptions map[*subscription]struct{}
		closed        bool // set by cancelAll; no new subscriptions start
	}
}

func newView() *view {
	v := &view{}
	v.mu.state = emptyMetadata()
	v.mu.controllerID = -1
	v.mu.changed = make(chan struct{})
	v.mu.subscriptions = map[*subscription]struct{}{}
	v.current.Store(emptyMetadata())
	return v
}

// setState publishes a new FSM state. Called on the Raft FSM goroutine; it
// never blocks on subscribers.
func (v *view) setState(state *Metadata) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.mu.state = state
	v.publishLocked()
}

// setController publishes a new controller id (-1 for none).
func (v *view) setController(controllerID int32) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mu.controllerID == controllerID {
		return
	}
	v.mu.controllerID = controllerID
	v.publishLocked()
}

func (v *view) publishLocked() {
	snapshot := *v.mu.state
	snapshot.ControllerID = v.mu.controllerID
	v.current.Store(&snapshot)
	close(v.mu.changed)
	v.mu.changed = make(chan struct{})
	for subscription := range v.mu.subscriptions {
		select {
		case subscription.wake <- struct{}{}:
		default: // already woken; it will load the latest snapshot.
		}
	}
}

// waitFor blocks until condition holds for the published snapshot, ctx
// ends, or stop closes.
func (v *view) waitFor(ctx context.Context, stop <-chan struct{}, condition func(*Metadata) bool) error {
	for {
		select {
		case <-stop:
			return ErrClosed
		default:
		}
		v.mu.Lock()
		snapshot, changed := v.current.Load(), v.mu.changed
		v.mu.Unlock()
		if condition(snapshot) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrClosed
		}
	}
}

// subscription delivers snapshots to one callback from its own goroutine.
type subscription struct {
	callback func(old, new *Metadata)
	wake     chan struct{} // capacity 1: a pending wake-up
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// subscribe starts a goroutine that calls callback with (previously
// delivered, latest) snapshot pairs until the returned cancel is called or
// cancelAll runs. After cancelAll it starts nothing and calls nothing.
func (v *view) subscribe(callback func(old, new *Metadata)) (cancel func()) {
	s := &subscription{
		callback: callback,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	v.mu.Lock()
	if v.mu.closed {
		v.mu.Unlock()
		return func() {}
	}
	v.mu.subscriptions[s] = struct{}{}
	v.mu.Unlock()
	go s.run(&v.current)
	return func() {
		s.once.Do(func() {
			v.mu.Lock()
			delete(v.mu.subscriptions, s)
			v.mu.Unlock()
			close(s.stop)
		})
		<-s.done
	}
}

// cancelAll stops every subscription and waits for their goroutines.
func (v *view) cancelAll() {
	v.mu.Lock()
	subscriptions := make([]*subscription, 0, len(v.mu.subscriptions))
	for s := range v.mu.subscriptions {
		subscriptions = append(subscriptions, s)
	}
	clear(v.mu.subscriptions)
	v.mu.closed = true
	v.mu.Unlock()
	for _, s := range subscriptions {
		s.once.Do(func() { close(s.stop) })
		<-s.done
	}
}

func (s *subscription) run(current *atomic.Pointer[Metadata]) {
	defer close(s.done)
	// The first delivery compares the current state with an empty cluster,
	// so a subscriber sees every existing topic as created.
	delivered := emptyMetadata()
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		if latest := current.Load(); latest != delivered {
			s.callback(delivered, latest)
			delivered = latest
		}
		select {
		case <-s.wake:
		case <-s.stop:
			return
		}
	}
}
