package nemesis

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/segment"
)

func scheduleConfig(seed uint64) ScheduleConfig {
	return ScheduleConfig{Seed: seed, Duration: 10 * time.Minute, Nodes: 3, Clients: 4, Kinds: AllKinds,
		Warmup: 5 * time.Second, Gap: 3 * time.Second, FaultTime: 8 * time.Second}
}

func TestScheduleIsReplayedFromItsSeed(t *testing.T) {
	a, b := Schedule(scheduleConfig(42)), Schedule(scheduleConfig(42))
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if reflect.DeepEqual(a, Schedule(scheduleConfig(43))) {
		t.Fatal("two seeds gave the same schedule")
	}
	kinds := map[Kind]bool{}
	var previousEnd time.Duration
	for _, f := range a {
		kinds[f.Kind] = true
		if f.Start < previousEnd || f.Start+f.Duration > 10*time.Minute {
			t.Fatalf("fault %v overlaps the previous one or outlasts the run", f)
		}
		previousEnd = f.Start + f.Duration
		switch f.Kind {
		case KillMajority:
			if len(f.Nodes) != 2 {
				t.Fatalf("%v: a majority of 3 is 2", f)
			}
		case ClientCut:
			if f.Client < 1 || f.Client > 4 || len(f.Unhealthy(3)) != 0 {
				t.Fatalf("%v: client or unhealthy nodes wrong", f)
			}
		case Bridge:
			if len(f.Nodes) != 2 || len(f.Unhealthy(3)) != 2 {
				t.Fatalf("%v: bridge of 3 is a middle node and two halves of one", f)
			}
		default:
			if len(f.Nodes) != 1 {
				t.Fatalf("%v: one target expected", f)
			}
		}
	}
	if len(kinds) != len(AllKinds) {
		t.Fatalf("10 minutes drew only %d of %d kinds", len(kinds), len(AllKinds))
	}
}

func TestParseKinds(t *testing.T) {
	kinds, err := ParseKinds("kill, isolate")
	if err != nil || !reflect.DeepEqual(kinds, []Kind{Kill, Isolate}) {
		t.Fatalf("%v %v", kinds, err)
	}
	if _, err := ParseKinds("kill,meteor"); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}

// TestTornTailIsRecovered tears the newest segment of a copy of a live log (what a crash leaves)
// and checks that the copy reopens with a valid prefix of what was written, never losing what the
// recovery point covers.
func TestTornTailIsRecovered(t *testing.T) {
	torn := 0
	for seed := uint64(1); seed <= 6; seed++ {
		live, crashed := t.TempDir(), t.TempDir()
		cfg := segment.DefaultConfig()
		cfg.SegmentBytes = 16 << 10
		cfg.Preallocate = seed%2 == 0
		log, err := segment.Open(filepath.Join(live, "chaos-0"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var builder batch.Builder
		appendSome := func(n int) {
			for i := range n {
				builder.Reset(time.Now())
				builder.Add(batch.Record{Value: []byte(strings.Repeat("v", 100+i))})
				if _, err := log.Append(builder.Finish(), 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		appendSome(150)
		if err := log.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		appendSome(20 + int(seed)*7) // not synced
		written := log.LogEndOffset()
		if err := os.CopyFS(filepath.Join(crashed, "chaos-0"), os.DirFS(filepath.Join(live, "chaos-0"))); err != nil {
			t.Fatal(err)
		}
		log.Close()
		_, position, _ := readRecoveryPoint(filepath.Join(crashed, "chaos-0"))
		done, err := TearTails(crashed, "chaos-", seed)
		if err != nil {
			t.Fatal(err)
		}
		reopened, err := segment.Open(filepath.Join(crashed, "chaos-0"), cfg)
		if err != nil {
			t.Fatalf("seed %d: reopen after %v: %v", seed, done, err)
		}
		end := reopened.LogEndOffset()
		if end > written {
			t.Fatalf("seed %d: %d records after tearing %d", seed, end, written)
		}
		if end < written {
			torn++
		}
		for offset := int64(0); offset < end; {
			chunk, err := reopened.Read(offset, 1<<20, end, nil)
			if err != nil || len(chunk) == 0 {
				t.Fatalf("seed %d: read at %d: %v", seed, offset, err)
			}
			valid, err := batch.Scan(chunk, func(h batch.Header, _ []byte) error { offset = h.NextOffset(); return nil })
			if valid == 0 {
				t.Fatalf("seed %d: no valid batch at %d: %v", seed, offset, err)
			}
		}
		reopened.Close()
		t.Logf("seed %d: %v (recovery point at byte %d): %d of %d records kept", seed, done, position, end, written)
	}
	if torn == 0 {
		t.Fatal("no seed tore anything")
	}
}
