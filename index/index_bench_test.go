package index

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

func BenchmarkOffsetLookup(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 18} { // 4 MiB and 1 GiB of log at one entry per 4 KiB
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			x, err := OpenOffsetIndex(filepath.Join(b.TempDir(), "b.index"), 0, n)
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			for i := int64(0); i < int64(n); i++ {
				if err := x.Append(i*40, i*4096); err != nil {
					b.Fatal(err)
				}
			}
			queries := make([]int64, 1024)
			for i := range queries {
				queries[i] = rand.Int64N(int64(n) * 40)
			}
			b.ReportAllocs()
			b.SetBytes(OffsetEntrySize)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x.Lookup(queries[i&1023])
			}
		})
	}
}

func BenchmarkTimeLookup(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 18} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			x, err := OpenTimeIndex(filepath.Join(b.TempDir(), "b.timeindex"), 0, n)
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			for i := int64(0); i < int64(n); i++ {
				if _, err := x.MaybeAppend(1_700_000_000_000+i*10, i*40); err != nil {
					b.Fatal(err)
				}
			}
			queries := make([]int64, 1024)
			for i := range queries {
				queries[i] = 1_700_000_000_000 + rand.Int64N(int64(n)*10)
			}
			b.ReportAllocs()
			b.SetBytes(TimeEntrySize)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x.Lookup(queries[i&1023])
			}
		})
	}
}
