// Package histogram is a log-linear histogram of non-negative integers (latencies in microseconds,
// sizes in bytes) in the manner of HdrHistogram: exact below 2^subBucketBits, and above that each
// power-of-two range is split into 2^subBucketBits equal buckets, so a recorded value is known to
// within a relative error of 2^-subBucketBits (under 0.8 %) whatever its magnitude. Count, sum, min
// and max are kept exactly.
//
// Bucket index of a value v (P = subBucketBits):
//
//	v < 2^(P+1):  index = v
//	otherwise:    shift = bits.Len64(v) - (P+1); index = shift*2^P + (v >> shift)
//
// so each index covers [mantissa<<shift, (mantissa+1)<<shift) with mantissa in [2^P, 2^(P+1)).
//
// A Histogram is not safe for concurrent use; callers that record from several goroutines guard it
// (or keep one per goroutine and Merge). Histograms marshal to JSON sparsely, so that agents can ship
// them to the coordinator, which merges them exactly.
package histogram

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
)

// subBucketBits sets the precision: 7 bits keep the relative error under 1/128.
const subBucketBits = 7

const subBucketCount = 1 << subBucketBits

// Histogram counts values.
//
// Invariant: count == sum of counts; when count > 0, min <= max and both are recorded values.
type Histogram struct {
	counts []uint64 // by bucket index; grown on demand
	count  uint64
	sum    float64 // float: a sum of many large values must not wrap
	min    int64
	max    int64
}

// New returns an empty histogram.
func New() *Histogram { return &Histogram{} }

// bucketIndex is the bucket holding v (v >= 0).
func bucketIndex(v int64) int {
	u := uint64(v)
	if u < 2*subBucketCount {
		return int(u)
	}
	shift := bits.Len64(u) - (subBucketBits + 1)
	return shift*subBucketCount + int(u>>shift)
}

// bucketBounds returns the smallest and largest value bucket index holds.
func bucketBounds(index int) (low, high int64) {
	if index < 2*subBucketCount {
		return int64(index), int64(index)
	}
	shift := index/subBucketCount - 1
	mantissa := uint64(index - shift*subBucketCount)
	low = int64(mantissa << shift)
	upper := (mantissa + 1) << shift
	if upper-1 > math.MaxInt64 {
		return low, math.MaxInt64
	}
	return low, int64(upper - 1)
}

// Record counts v once; negative values count as 0.
func (h *Histogram) Record(v int64) { h.RecordN(v, 1) }

// RecordN counts v n times.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	v = max(v, 0)
	index := bucketIndex(v)
	if index >= len(h.counts) {
		h.grow(index)
	}
	h.counts[index] += n
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if h.count == 0 || v > h.max {
		h.max = v
	}
	h.count += n
	h.sum += float64(v) * float64(n)
}

func (h *Histogram) grow(index int) {
	size := max(index+1, 2*len(h.counts), 4*subBucketCount)
	grown := make([]uint64, size)
	copy(grown, h.counts)
	h.counts = grown
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.count }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() int64 { return h.min }

// Max is the largest value recorded.
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact mean (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count)
}

// Quantile returns the value at quantile q in [0, 1]: the upper bound of the bucket holding the
// ceil(q*count)-th smallest value, clamped to [Min, Max], so it never understates a latency by more
// than the bucket's width and is exact at the ends. 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.count)))
	rank = max(rank, 1)
	var seen uint64
	for index, c := range h.counts {
		seen += c
		if seen >= rank {
			_, high := bucketBounds(index)
			return min(max(high, h.min), h.max)
		}
	}
	return h.max
}

// Merge adds every value of other to h.
func (h *Histogram) Merge(other *Histogram) {
	if other == nil || other.count == 0 {
		return
	}
	if len(other.counts) > len(h.counts) {
		h.grow(len(other.counts) - 1)
	}
	for index, c := range other.counts {
		h.counts[index] += c
	}
	if h.count == 0 || other.min < h.min {
		h.min = other.min
	}
	if h.count == 0 || other.max > h.max {
		h.max = other.max
	}
	h.count += other.count
	h.sum += other.sum
}

// Reset empties h, keeping its memory.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.count, h.sum, h.min, h.max = 0, 0, 0, 0
}

// Clone returns a copy of h.
func (h *Histogram) Clone() *Histogram {
	c := *h
	c.counts = append([]uint64(nil), h.counts...)
	return &c
}

// wire is the JSON form: buckets as [index, count] pairs for the non-empty ones.
type wire struct {
	Count   uint64      `json:"count"`
	Sum     float64     `json:"sum"`
	Min     int64       `json:"min"`
	Max     int64       `json:"max"`
	Buckets [][2]uint64 `json:"buckets"`
}

// MarshalJSON writes the sparse form.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	w := wire{Count: h.count, Sum: h.sum, Min: h.min, Max: h.max, Buckets: [][2]uint64{}}
	for index, c := range h.counts {
		if c > 0 {
			w.Buckets = append(w.Buckets, [2]uint64{uint64(index), c})
		}
	}
	return json.Marshal(w)
}

// maxIndex bounds decoded bucket indexes: the index of math.MaxInt64.
var maxIndex = bucketIndex(math.MaxInt64)

// UnmarshalJSON reads the sparse form, checking that it is consistent.
func (h *Histogram) UnmarshalJSON(data []byte) error {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("histogram: %w", err)
	}
	decoded := Histogram{}
	var total uint64
	for _, b := range w.Buckets {
		if b[0] > uint64(maxIndex) {
			return fmt.Errorf("histogram: bucket index %d beyond %d", b[0], maxIndex)
		}
		index := int(b[0])
		if index >= len(decoded.counts) {
			decoded.grow(index)
		}
		decoded.counts[index] += b[1]
		total += b[1]
	}
	if total != w.Count || (w.Count > 0 && (w.Min < 0 || w.Min > w.Max)) {
		return fmt.Errorf("histogram: buckets hold %d values, count says %d (min %d, max %d)", total, w.Count, w.Min, w.Max)
	}
	decoded.count, decoded.sum, decoded.min, decoded.max = w.Count, w.Sum, w.Min, w.Max
	*h = decoded
	return nil
}
