package console

import (
	"sync"
	"time"
)

// loginLimiter refuses logins from a remote host after maxFailures failed ones within window,
// until window has passed since the first of them: the broker checks the password, but the
// console should not let one browser try passwords as fast as it can send forms. It remembers
// at most maxHosts hosts (when full, it forgets those whose window is over, then the oldest).
type loginLimiter struct {
	maxFailures int
	window      time.Duration
	maxHosts    int
	mu          struct {
		sync.Mutex
		byHost map[string]failedLogins // Invariant: len(byHost) <= maxHosts
	}
}

type failedLogins struct {
	first time.Time // the first failure of the current window
	count int
}

func newLoginLimiter(maxFailures int, window time.Duration, maxHosts int) *loginLimiter {
	l := &loginLimiter{maxFailures: maxFailures, window: window, maxHosts: maxHosts}
	l.mu.byHost = map[string]failedLogins{}
	return l
}

// allowed reports whether host may try to log in at now.
func (l *loginLimiter) allowed(host string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.mu.byHost[host]
	return !ok || f.count < l.maxFailures || now.Sub(f.first) >= l.window
}

// failed counts a failed login of host at now.
func (l *loginLimiter) failed(host string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.mu.byHost[host]
	if !ok || now.Sub(f.first) >= l.window {
		f = failedLogins{first: now}
	}
	f.count++
	if !ok && len(l.mu.byHost) >= l.maxHosts {
		l.forgetLocked(now)
	}
	l.mu.byHost[host] = f
}

// succeeded forgets host's failures.
func (l *loginLimiter) succeeded(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.byHost, host)
}

// forgetLocked makes room for one host: those whose window is over go, else the oldest.
func (l *loginLimiter) forgetLocked(now time.Time) {
	var oldest string
	for host, f := range l.mu.byHost {
		if now.Sub(f.first) >= l.window {
			delete(l.mu.byHost, host)
		} else if oldest == "" || f.first.Before(l.mu.byHost[oldest].first) {
			oldest = host
		}
	}
	if len(l.mu.byHost) >= l.maxHosts {
		delete(l.mu.byHost, oldest)
	}
}
