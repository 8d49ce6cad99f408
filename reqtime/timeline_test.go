package reqtime

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestTimelineRecordsStages(t *testing.T) {
	received := time.Now()
	var tl Timeline
	tl.Received = received
	at := func(ms int) time.Time { return received.Add(time.Duration(ms) * time.Millisecond) }
	tl.Record(Queue, received, at(2))
	tl.Record(Append, at(2), at(5))
	tl.Record(Send, at(9), at(10))

	if d, ok := tl.Duration(Append); !ok || d != 3*time.Millisecond {
		t.Fatalf("append = %v, %v; want 3ms, true", d, ok)
	}
	if _, ok := tl.Duration(Fsync); ok {
		t.Fatal("fsync reported though never recorded")
	}
	if begin, end, ok := tl.Interval(Send); !ok || !begin.Equal(at(9)) || !end.Equal(at(10)) {
		t.Fatalf("send interval = %v..%v, %v", begin, end, ok)
	}
	if got := tl.End(); got != 10*time.Millisecond {
		t.Fatalf("End = %v, want 10ms", got)
	}
	tl.Record(Append, at(3), at(4)) // recording again replaces
	if d, _ := tl.Duration(Append); d != time.Millisecond {
		t.Fatalf("re-recorded append = %v, want 1ms", d)
	}
}

func TestTimelineClampsBackwardInstants(t *testing.T) {
	received := time.Now()
	tl := Timeline{Received: received}
	tl.Record(Wait, received.Add(-time.Second), received.Add(-2*time.Second))
	if begin, end, ok := tl.Interval(Wait); !ok || !begin.Equal(received) || !end.Equal(received) {
		t.Fatalf("clamped interval = %v..%v (received %v)", begin, end, received)
	}
	tl.Record(Read, received.Add(5*time.Millisecond), received.Add(time.Millisecond))
	if d, _ := tl.Duration(Read); d != 0 {
		t.Fatalf("end before begin gave %v, want 0", d)
	}
	tl.Record(StageCount, received, received.Add(time.Second)) // ignored
	if tl.Has(StageCount) || tl.End() != 5*time.Millisecond {
		t.Fatalf("out-of-range stage recorded: end %v", tl.End())
	}
}

func TestTimelineLogsStageDurations(t *testing.T) {
	received := time.Now()
	tl := Timeline{Received: received}
	tl.Record(Queue, received, received.Add(time.Millisecond))
	tl.Record(Fsync, received.Add(time.Millisecond), received.Add(4*time.Millisecond))
	var out bytes.Buffer
	slog.New(slog.NewTextHandler(&out, nil)).Info("slow", "stages", tl)
	line := out.String()
	for _, want := range []string{"stages.total=4ms", "stages.queue=1ms", "stages.fsync=3ms"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "append") {
		t.Errorf("log line %q names a stage never recorded", line)
	}
}

func TestStageNames(t *testing.T) {
	for s := range StageCount {
		if s.String() == "unknown" || s.String() == "" {
			t.Errorf("stage %d has no name", s)
		}
	}
	if StageCount.String() != "unknown" {
		t.Errorf("StageCount named %q", StageCount.String())
	}
}
