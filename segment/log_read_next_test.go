package segment

import (
	"math/rand/v2"
	"testing"

	"github.com/sluice-mq/sluice/batch"
)

// TestSliceNextOffset checks Slice's NextOffset against the batches really in the range: for
// random fetch offsets, budgets and marks over a log of batches of varied record counts spread over
// several segments (with sparse index entries to skip by), NextOffset is the offset after the last
// whole batch of the bytes, and 0 for an empty range.
func TestSliceNextOffset(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 512
	l := openLog(t, t.TempDir(), cfg)
	defer l.Close()
	random := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		if _, err := l.Append(testBatch(t, "n", 1+random.IntN(9), 20+random.IntN(200)), 0); err != nil {
			t.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	for i := range 3000 {
		offset := random.Int64N(end + 1)
		budget := 1 + random.Int64N(8<<10)
		upTo := offset + random.Int64N(end-offset+2)
		slice, err := l.Slice(offset, budget, upTo)
		if err != nil {
			t.Fatal(err)
		}
		if slice.Size == 0 {
			if slice.NextOffset != 0 {
				t.Fatalf("read %d: empty Slice(%d, %d, %d) has NextOffset %d", i, offset, budget, upTo, slice.NextOffset)
			}
			continue
		}
		data := make([]byte, slice.Size)
		if _, err := slice.File.ReadAt(data, slice.Position); err != nil {
			t.Fatal(err)
		}
		want := int64(-1)
		for rest := data; len(rest) > 0; {
			h, err := batch.ParseHeader(rest)
			if err != nil {
				t.Fatal(err)
			}
			want = h.NextOffset()
			rest = rest[h.Size():]
		}
		if slice.NextOffset != want {
			t.Fatalf("read %d: Slice(%d, %d, %d) has NextOffset %d, its batches end at %d", i, offset, budget, upTo, slice.NextOffset, want)
		}
	}
}
