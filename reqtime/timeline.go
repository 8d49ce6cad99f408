package reqtime

import (
	"log/slog"
	"time"
)

// Stage names one step of a request.
type Stage uint8

// The stages; see the package doc for what each covers.
const (
	Queue Stage = iota
	Append
	Fsync
	Replication
	Wait
	Read
	Send
	// StageCount is the number of stages.
	StageCount
)

var stageNames = [StageCount]string{"queue", "append", "fsync", "replication", "wait", "read", "send"}

// String is the stage's lower-case name, as used in metric labels and span names.
func (s Stage) String() string {
	if s >= StageCount {
		return "unknown"
	}
	return stageNames[s]
}

// ProduceStages and FetchStages list, in order, the stages a produce and a fetch may record.
var (
	ProduceStages = [...]Stage{Queue, Append, Fsync, Replication, Send}
	FetchStages   = [...]Stage{Queue, Wait, Read, Send}
)

// Timeline is the stages one request went through. The zero value has no stages; set Received
// before recording any.
type Timeline struct {
	// Received is when the request's frame was complete; stage instants are offsets from it.
	Received time.Time

	// Invariant: for each stage whose bit is set in recorded, 0 <= begin[s] <= end[s].
	begin, end [StageCount]time.Duration
	recorded   uint16
}

// Record sets stage s to [begin, end]. Instants before Received count as Received, and an end
// before begin as begin (the monotonic clock never goes back; this guards callers' mix-ups).
func (t *Timeline) Record(s Stage, begin, end time.Time) {
	if s >= StageCount {
		return
	}
	from := max(begin.Sub(t.Received), 0)
	to := max(end.Sub(t.Received), from)
	t.begin[s], t.end[s] = from, to
	t.recorded |= 1 << s
}

// Has reports whether stage s was recorded.
func (t *Timeline) Has(s Stage) bool { return s < StageCount && t.recorded&(1<<s) != 0 }

// Duration is how long stage s took, and whether it was recorded.
func (t *Timeline) Duration(s Stage) (time.Duration, bool) {
	if !t.Has(s) {
		return 0, false
	}
	return t.end[s] - t.begin[s], true
}

// Interval is stage s's begin and end instants, and whether it was recorded.
func (t *Timeline) Interval(s Stage) (begin, end time.Time, ok bool) {
	if !t.Has(s) {
		return time.Time{}, time.Time{}, false
	}
	return t.Received.Add(t.begin[s]), t.Received.Add(t.end[s]), true
}

// End is the latest end of any recorded stage as an offset from Received (0 with none).
func (t *Timeline) End() time.Duration {
	var latest time.Duration
	for s := range StageCount {
		if t.Has(s) {
			latest = max(latest, t.end[s])
		}
	}
	return latest
}

// LogValue makes a Timeline log as a group of its recorded stages' durations, in stage order,
// with "total" (received until the last stage ended) first.
func (t Timeline) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 1+StageCount)
	attrs = append(attrs, slog.Duration("total", t.End()))
	for s := range StageCount {
		if d, ok := t.Duration(s); ok {
			attrs = append(attrs, slog.Duration(s.String(), d))
		}
	}
	return slog.GroupValue(attrs...)
}
