package segment

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Truncate is what a follower uses to drop a suffix that diverges from its leader; a crash in the
// middle of it must leave a log that is the old one cut at a batch boundary at or after the target
// (so that truncating again gives the intended log), with nothing below the target lost and nothing
// taken for damage.

// dirFiles reads every regular file of dir.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestTruncateCrashStates truncates a running log and replays, from copies of its files before and
// after, every state a crash inside Truncate can leave on disk: later segments unlinked newest first
// (any number of them), the segment holding the target cut or not, its indexes and the recovery point
// old or new. Each state must open as a prefix of the old log ending at or after the target, report
// no damage, truncate to the intended log, and take appends at the right offset.
func TestTruncateCrashStates(t *testing.T) {
	gen := newBatchGen(61)
	var layout [][]byte
	for i := 0; i < 5*6; i++ {
		layout = append(layout, gen.next(3, 30+gen.rng.IntN(300)))
	}
	extra := gen.next(2, 80)
	build := func(t *testing.T) (dir string, l *Log, batches []storedBatch, bases []int64) {
		dir = t.TempDir()
		l = openLog(t, dir, crashConfig())
		for i, raw := range layout {
			if i%6 == 0 {
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
				bases = append(bases, l.LogEndOffset())
			}
			stored, _ := appendBatches(t, l, bytes.Clone(raw), 2)
			batches = append(batches, stored...)
		}
		if err := l.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		l.flush.stop() // no checkpoint may land between the snapshots
		return dir, l, batches, bases
	}
	_, _, batches, bases := build(t)
	multiRecord := slices.IndexFunc(batches, func(b storedBatch) bool { return b.base >= bases[4] && b.last > b.base })
	targets := map[string]int64{
		"sealed-middle":       batches[8].base,
		"segment-base":        bases[2],
		"inside-active-batch": batches[multiRecord].base + 1,
		"log-start":           0,
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			dir, l, batches, bases := build(t)
			before := dirFiles(t, dir)
			if err := l.Truncate(target); err != nil {
				t.Fatal(err)
			}
			after := dirFiles(t, dir)
			m := &logModel{batches: batches, end: batches[len(batches)-1].last + 1}
			m.truncate(target)
			want := m.batches
			l.abandon()

			holder := slices.IndexFunc(bases, func(b int64) bool { return b > target }) - 1
			if holder < 0 {
				holder = len(bases) - 1
			}
			stem := func(k int) string { return filepath.Base(segmentName("", bases[k], "")) }
			// state builds the files of a crash with the given number of later segments still there,
			// the holder's data, its indexes and the recovery point from before or after.
			state := func(remaining int, cutData, newIndexes, newPoint bool) map[string][]byte {
				files := map[string][]byte{}
				for name, raw := range before {
					files[name] = raw
				}
				for k := holder + 1 + remaining; k < len(bases); k++ {
					for _, suffix := range []string{dataSuffix, offsetSuffix, timeSuffix} {
						delete(files, stem(k)+suffix)
					}
				}
				pick := func(name string, fromAfter bool) {
					if fromAfter {
						files[name] = after[name]
					}
				}
				pick(stem(holder)+dataSuffix, cutData)
				pick(stem(holder)+offsetSuffix, newIndexes)
				pick(stem(holder)+timeSuffix, newIndexes)
				pick(recoveryPointFile, newPoint)
				return files
			}
			type crashState struct {
				name  string
				files map[string][]byte
			}
			var states []crashState
			later := len(bases) - 1 - holder
			for remaining := later; remaining >= 0; remaining-- {
				for _, newIndexes := range []bool{false, true} {
					states = append(states, crashState{fmt.Sprintf("later%d-indexes%v", remaining, newIndexes), state(remaining, false, newIndexes, false)})
				}
			}
			for _, newIndexes := range []bool{false, true} {
				for _, newPoint := range []bool{false, true} {
					states = append(states, crashState{fmt.Sprintf("cut-indexes%v-point%v", newIndexes, newPoint), state(0, true, newIndexes, newPoint)})
				}
			}
			for _, s := range states {
				t.Run(s.name, func(t *testing.T) {
					dir := t.TempDir()
					for name, raw := range s.files {
						if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					var lines logLines
					cfg := crashConfig()
					cfg.Logger = lines.logger()
					l := openLog(t, dir, cfg)
					if got := lines.matching("level=ERROR"); len(got) > 0 {
						t.Fatalf("Open after a crash in Truncate logged errors: %q", got)
					}
					end := l.LogEndOffset()
					kept := slices.IndexFunc(batches, func(b storedBatch) bool { return b.base >= end })
					if kept < 0 {
						kept = len(batches)
					}
					if kept < len(want) || (kept > 0 && batches[kept-1].last+1 != end) {
						t.Fatalf("log ends at %d: not the old log cut at or after the target %d", end, target)
					}
					checkBatches(t, l, batches[:kept])
					if err := l.Truncate(target); err != nil {
						t.Fatal(err)
					}
					checkBatches(t, l, want)
					stored, _ := appendBatches(t, l, bytes.Clone(extra), 4)
					l.abandon()
					l = openLog(t, dir, cfg)
					checkBatches(t, l, append(slices.Clone(want), stored...))
					l.Close()
				})
			}
		})
	}
}
