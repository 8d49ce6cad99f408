package compaction

import (
	"testing"
	"time"
)

func TestThrottleDelay(t *testing.T) {
	now := time.Unix(0, 0)
	th := NewThrottle(1000) // bytes per second
	th.clock = func() time.Time { return now }
	th.mu.last = now
	if d := th.delay(1000); d != 0 {
		t.Fatalf("the first second's bytes waited %v", d)
	}
	if d := th.delay(500); d != 500*time.Millisecond {
		t.Fatalf("500 bytes over the rate: wait %v, want 500ms", d)
	}
	now = now.Add(1500 * time.Millisecond) // the debt is paid and a second's worth refilled
	if d := th.delay(1000); d != 0 {
		t.Fatalf("after refilling: wait %v", d)
	}
	now = now.Add(time.Hour) // the bucket holds at most one second
	if d := th.delay(3000); d != 2*time.Second {
		t.Fatalf("a burst after an idle hour: wait %v, want 2s", d)
	}
	if got := th.Throttled(); got != 2500*time.Millisecond {
		t.Fatalf("Throttled() = %v, want the 2.5s of waits imposed", got)
	}
	var unlimited *Throttle
	if unlimited.Throttled() != 0 {
		t.Fatal("a nil throttle reports waits")
	}
	if unlimited.delay(1<<30) != 0 || NewThrottle(0).delay(1<<30) != 0 {
		t.Fatal("no limit waited")
	}
}
