package console

import (
	"fmt"
	"testing"
	"time"
)

func TestLoginLimiter(t *testing.T) {
	start := time.Unix(1000, 0)
	l := newLoginLimiter(3, time.Minute, 2)
	for i := range 3 {
		if !l.allowed("a", start) {
			t.Fatalf("host a refused after %d failures", i)
		}
		l.failed("a", start.Add(time.Duration(i)*time.Second))
	}
	if l.allowed("a", start.Add(59*time.Second)) {
		t.Error("host a allowed a 4th try within the window")
	}
	if !l.allowed("b", start) {
		t.Error("host b refused for a's failures")
	}
	if !l.allowed("a", start.Add(time.Minute)) {
		t.Error("host a still refused once the window passed")
	}
	l.failed("a", start.Add(time.Minute)) // a new window with one failure
	if !l.allowed("a", start.Add(time.Minute)) {
		t.Error("one failure in the new window refuses host a")
	}
	l.succeeded("a")
	for i := range 5 { // more hosts than it keeps: the map stays bounded
		l.failed(fmt.Sprint("h", i), start.Add(2*time.Minute))
	}
	if n := len(l.mu.byHost); n > 2 {
		t.Errorf("%d hosts remembered, want at most 2", n)
	}
}
