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
