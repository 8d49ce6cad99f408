package client

import (
	"testing"
	"time"
)

// The sender may take a batch a timer's lateness before its linger ends, but never more than half
// the linger early, and a zero linger stays zero.
func TestLingerSlack(t *testing.T) {
	for _, c := range []struct{ linger, slack time.Duration }{
		{0, 0},
		{time.Millisecond, 500 * time.Microsecond},
		{2 * time.Millisecond, time.Millisecond},
		{5 * time.Millisecond, time.Millisecond},
		{time.Second, time.Millisecond},
	} {
		if got := lingerSlack(c.linger); got != c.slack {
			t.Errorf("lingerSlack(%v) = %v, want %v", c.linger, got, c.slack)
		}
	}
}
