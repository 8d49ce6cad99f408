package replication

import (
	"testing"
	"time"
)

// A follower wakes exactly when its leader's silence passes the limit (FetchMaxWait plus
// LeaderUnreachableAfter), and when its oldest request becomes overdue, not on the next
// unreachableReportInterval tick. In a chaos run the tick made reports up to 450 ms late (silent
// for 1.95 s against a limit of 1.5 s), and every one of those milliseconds was one without acks
// on the partitions that report would have moved.
func TestSilenceCheckedWhenDue(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FetchMaxWait, cfg.LeaderUnreachableAfter = 500*time.Millisecond, time.Second
	f := &fetcher{manager: &Manager{config: cfg}}
	t0 := time.Unix(1000, 0)
	f.lastHeard = t0

	if got := f.silenceCheckIn(t0.Add(time.Second), nil); got != unreachableReportInterval {
		t.Fatalf("silent 1 s of 1.5 s: check in %v, want the interval %v", got, unreachableReportInterval)
	}
	if got := f.silenceCheckIn(t0.Add(1350*time.Millisecond), nil); got != 150*time.Millisecond {
		t.Fatalf("silent 1.35 s of 1.5 s: check in %v, want 150ms", got)
	}
	if got := f.silenceCheckIn(t0.Add(1600*time.Millisecond), nil); got != time.Millisecond {
		t.Fatalf("a report overdue: check in %v, want at once (1ms)", got)
	}
	f.lastReport = t0.Add(1500 * time.Millisecond)
	if got, want := f.silenceCheckIn(t0.Add(1600*time.Millisecond), nil), unreachableReportInterval-100*time.Millisecond; got != want {
		t.Fatalf("reported 100 ms ago: check in %v, want the rest of the report interval, %v", got, want)
	}

	// A request that has waited 1.4 s is overdue 101 ms later, although the leader answered
	// another one just now.
	f.lastHeard, f.lastReport = t0.Add(1400*time.Millisecond), time.Time{}
	pending := []inFlightRequest{{sentAt: t0}}
	if got := f.silenceCheckIn(t0.Add(1400*time.Millisecond), pending); got != 101*time.Millisecond {
		t.Fatalf("oldest request out 1.4 s: check in %v, want 101ms", got)
	}

	cfg.LeaderUnreachableAfter = 0
	f.manager.config = cfg
	if got := f.silenceCheckIn(t0.Add(10*time.Second), pending); got != unreachableReportInterval {
		t.Fatalf("reports off: check in %v, want the interval", got)
	}
}
