package histogram

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBucketsCoverEveryValueOnce(t *testing.T) {
	// Consecutive buckets tile the integers: each starts one past the previous one's end.
	previousHigh := int64(-1)
	for index := 0; index <= maxIndex; index++ {
		low, high := bucketBounds(index)
		if low != previousHigh+1 || high < low {
			t.Fatalf("bucket %d = [%d, %d], previous ended at %d", index, low, high, previousHigh)
		}
		if bucketIndex(low) != index || bucketIndex(high) != index {
			t.Fatalf("bucket %d = [%d, %d] but values map to %d and %d", index, low, high, bucketIndex(low), bucketIndex(high))
		}
		previousHigh = high
	}
	if previousHigh != math.MaxInt64 {
		t.Fatalf("buckets end at %d", previousHigh)
	}
}

func TestRelativeError(t *testing.T) {
	for _, v := range []int64{0, 1, 255, 256, 257, 1000, 123456, 1 << 40, math.MaxInt64} {
		low, high := bucketBounds(bucketIndex(v))
		if v < low || v > high {
			t.Fatalf("%d outside its bucket [%d, %d]", v, low, high)
		}
		if width := float64(high - low); width > float64(v)/subBucketCount+1 {
			t.Fatalf("bucket of %d is %v wide", v, width)
		}
	}
}

// TestQuantilesAgainstSort checks quantiles against the exact answer from a sorted slice.
func TestQuantilesAgainstSort(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		h := New()
		n := 1 + random.IntN(5000)
		values := make([]int64, n)
		for i := range values {
			values[i] = int64(random.ExpFloat64() * float64(1+random.IntN(1_000_000)))
			h.Record(values[i])
		}
		slices.Sort(values)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
			rank := max(int(math.Ceil(q*float64(n))), 1)
			exact := values[rank-1]
			got := h.Quantile(q)
			if got < exact || float64(got-exact) > float64(exact)/subBucketCount+1 {
				t.Fatalf("round %d q=%v: got %d, exact %d", round, q, got, exact)
			}
		}
		if h.Min() != values[0] || h.Max() != values[n-1] || h.Count() != uint64(n) {
			t.Fatalf("min/max/count %d/%d/%d, want %d/%d/%d", h.Min(), h.Max(), h.Count(), values[0], values[n-1], n)
		}
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	random := rand.New(rand.NewPCG(3, 4))
	all, a, b := New(), New(), New()
	for i := 0; i < 10000; i++ {
		v := random.Int64N(1 << 30)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b)
	a.Merge(nil)
	a.Merge(New())
	for _, q := range []float64{0.5, 0.99, 0.999, 1} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Fatalf("q=%v: merged %d, direct %d", q, a.Quantile(q), all.Quantile(q))
		}
	}
	if a.Count() != all.Count() || a.Min() != all.Min() || a.Max() != all.Max() || a.Mean() != all.Mean() {
		t.Fatal("merged summary differs")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	h := New()
	for _, v := range []int64{3, 3, 700, 70000, 1 << 50, -5} {
		h.Record(v)
	}
	data, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back Histogram
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	for _, q := range []float64{0, 0.5, 0.9, 1} {
		if back.Quantile(q) != h.Quantile(q) {
			t.Fatalf("q=%v: %d after round trip, %d before", q, back.Quantile(q), h.Quantile(q))
		}
	}
	if back.Count() != 6 || back.Min() != 0 || back.Max() != 1<<50 {
		t.Fatalf("summary after round trip: %d %d %d", back.Count(), back.Min(), back.Max())
	}
	for _, bad := range []string{`{"count":2,"buckets":[[1,1]]}`, `{"count":1,"buckets":[[99999999,1]]}`, `{"count":1,"min":5,"max":1,"buckets":[[1,1]]}`, `[`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Fatalf("%s decoded without error", bad)
		}
	}
}

func TestEmpty(t *testing.T) {
	h := New()
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Fatal("empty histogram reports values")
	}
	h.Record(42)
	h.Reset()
	if h.Count() != 0 || h.Quantile(1) != 0 {
		t.Fatal("reset histogram reports values")
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"count":1,"sum":5,"min":5,"max":5,"buckets":[[5,1]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Histogram
		if json.Unmarshal(data, &h) == nil {
			h.Quantile(0.99)
			h.Merge(&h)
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	h := New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(int64(i & 0xfffff))
	}
}
