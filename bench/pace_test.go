package bench

import (
	"context"
	"testing"
	"time"
)

// sendLog is a Producer that notes, for each record, the time produceLoop counts its latency from
// and when Send was actually called.
type sendLog struct {
	counted, called []time.Time
	stopAfter       int
	cancel          context.CancelFunc
}

func (s *sendLog) Send(_ context.Context, _ string, _, _ []byte, sent time.Time) error {
	s.called = append(s.called, time.Now())
	s.counted = append(s.counted, sent)
	if len(s.counted) == s.stopAfter {
		s.cancel()
	}
	return nil
}

func (s *sendLog) Close(context.Context) error { return nil }

// A paced loop keeps its schedule within sendAhead, counts no record from after it was handed to
// the producer, and sends ahead of schedule rather than oversleeping its timer.
func TestProduceLoopPacesWithoutFlatteringLatency(t *testing.T) {
	const rate, records = 20_000.0, 2_000 // 100 ms, a record every 50 µs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &sendLog{stopAfter: records, cancel: cancel}
	payload := make([]byte, 4096)
	if err := produceLoop(ctx, log, "t", 100, rate, payload, nil, 1, nil); err != nil {
		t.Fatal(err)
	}
	if len(log.counted) != records {
		t.Fatalf("sent %d records, want %d", len(log.counted), records)
	}
	start := log.counted[0] // record 0 is due at the loop's start and never ahead of it
	ahead := 0
	for i := range log.counted {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if log.counted[i].After(log.called[i]) {
			t.Fatalf("record %d counted from %v, after Send was called", i, log.counted[i].Sub(log.called[i]))
		}
		if early := due.Sub(log.called[i]); early > sendAhead {
			t.Fatalf("record %d sent %v before it was due, more than %v", i, early, sendAhead)
		}
		if log.counted[i].Before(due) {
			ahead++
		}
	}
	if ahead == 0 {
		t.Fatalf("no record of %d went ahead of schedule: the loop sleeps until each is due", records)
	}
}
