package segment

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/batch"
)

// abandon simulates a crash of the process that owns l: the flusher stops and the descriptors close,
// but nothing is sealed, trimmed or marked clean. What reached the page cache stays, as it does when
// a process is killed.
func (l *Log) abandon() {
	l.flush.stop()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Swap(true) {
		return
	}
	for _, s := range l.segmentList() {
		s.close()
	}
	for _, r := range l.retired {
		r.segment.close()
	}
	l.retired = nil
	l.flush.failWaiters(ErrClosed)
}

// storedBatch is what the model remembers of one appended batch: its offsets and its bytes as the
// log stored them (offsets and leader epoch rewritten).
type storedBatch struct {
	base, last   int64
	maxTimestamp int64
	raw          []byte
}

func (b storedBatch) size() int64 { return int64(len(b.raw)) }

// batchGen builds batches of varied sizes and timestamps from a seeded source.
type batchGen struct {
	rng     *rand.Rand
	builder batch.Builder
	clock   int64 // ms; timestamps wander around it, not always increasing
}

func newBatchGen(seed uint64) *batchGen {
	return &batchGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), clock: 1_700_000_000_000}
}

// next builds one batch with 1..maxRecords records whose values total about valueBytes.
func (g *batchGen) next(maxRecords, valueBytes int) []byte {
	g.clock += g.rng.Int64N(50)
	base := g.clock - g.rng.Int64N(1000) // producers' clocks disagree: not monotonic
	g.builder.Reset(time.UnixMilli(base))
	records := 1 + g.rng.IntN(maxRecords)
	for i := 0; i < records; i++ {
		value := make([]byte, valueBytes/records)
		for j := range value {
			value[j] = byte(g.rng.Uint32())
		}
		var key []byte
		if g.rng.IntN(3) == 0 {
			key = []byte{byte(i)}
		}
		g.builder.Add(batch.Record{Key: key, Value: value, Timestamp: time.UnixMilli(base + g.rng.Int64N(2000))})
	}
	return bytes.Clone(g.builder.Finish())
}

// random builds a batch of a random size: mostly small, sometimes a few KiB.
func (g *batchGen) random() []byte {
	switch g.rng.IntN(10) {
	case 0:
		return g.next(4, 2000+g.rng.IntN(6000))
	case 1, 2:
		return g.next(8, 500+g.rng.IntN(1500))
	default:
		return g.next(5, g.rng.IntN(400))
	}
}

// appendBatches appends raw (one or more batches) and returns the stored batches.
func appendBatches(t testing.TB, l *Log, raw []byte, epoch int32) ([]storedBatch, AppendResult) {
	t.Helper()
	want := l.LogEndOffset()
	res, err := l.Append(raw, epoch)
	if err != nil {
		t.Fatalf("append at %d: %v", want, err)
	}
	if res.BaseOffset != want {
		t.Fatalf("append got base offset %d, log end was %d", res.BaseOffset, want)
	}
	return splitBatches(t, raw), res
}

func splitBatches(t testing.TB, raw []byte) []storedBatch {
	t.Helper()
	var out []storedBatch
	if _, err := batch.Scan(raw, func(h batch.Header, b []byte) error {
		out = append(out, storedBatch{base: h.BaseOffset, last: h.LastOffset(), maxTimestamp: h.MaxTimestamp, raw: bytes.Clone(b)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkBatches verifies that the log holds exactly want (from its start) and that every batch reads
// back byte for byte, both from its base offset and from its last offset.
func checkBatches(t testing.TB, l *Log, want []storedBatch) {
	t.Helper()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	wantEnd := start
	var wantSize int64
	if len(want) > 0 {
		if want[0].base != start {
			t.Fatalf("log starts at %d, model at %d", start, want[0].base)
		}
		wantEnd = want[len(want)-1].last + 1
	}
	for _, b := range want {
		wantSize += b.size()
	}
	if end != wantEnd {
		t.Fatalf("log end %d, want %d", end, wantEnd)
	}
	if l.Size() != wantSize {
		t.Fatalf("log size %d, want %d", l.Size(), wantSize)
	}
	var buf []byte
	for _, b := range want {
		for _, offset := range []int64{b.base, b.last} {
			got, err := l.Read(offset, 1, math.MaxInt64, buf)
			if err != nil {
				t.Fatalf("read %d: %v", offset, err)
			}
			if !bytes.Equal(got, b.raw) {
				h, err := batch.Validate(got)
				t.Fatalf("read %d: %d bytes (header %+v, %v), want batch [%d, %d] of %d bytes", offset, len(got), h, err, b.base, b.last, len(b.raw))
			}
			buf = got
		}
	}
	if got, err := l.Read(end, 1<<20, math.MaxInt64, nil); err != nil || len(got) != 0 {
		t.Fatalf("read at end %d: %d bytes, %v", end, len(got), err)
	}
	if _, err := l.Read(end+1, 1<<20, math.MaxInt64, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read beyond end: %v", err)
	}
}

// copyDir copies the regular files of src (a log directory) into a new directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// segmentBases returns the base offsets of the log's segments.
func segmentBases(l *Log) []int64 {
	var bases []int64
	for _, s := range l.segmentList() {
		bases = append(bases, s.baseOffset)
	}
	return bases
}

// expectedTimestampLookup is the simple version OffsetForTimestamp is checked against: the first
// batch, in log order, whose max timestamp reaches timestamp.
func expectedTimestampLookup(batches []storedBatch, timestamp int64) (int64, int64, bool) {
	for _, b := range batches {
		if b.maxTimestamp >= timestamp {
			return b.base, b.maxTimestamp, true
		}
	}
	return 0, 0, false
}

func checkTimestampLookups(t testing.TB, l *Log, batches []storedBatch, rng *rand.Rand, n int) {
	t.Helper()
	if len(batches) == 0 {
		return
	}
	lo, hi := batches[0].maxTimestamp, batches[0].maxTimestamp
	for _, b := range batches {
		lo, hi = min(lo, b.maxTimestamp), max(hi, b.maxTimestamp)
	}
	probe := func(ts int64) {
		offset, stamp, found, err := l.OffsetForTimestamp(ts)
		wantOffset, wantStamp, wantFound := expectedTimestampLookup(batches, ts)
		if err != nil || found != wantFound || offset != wantOffset || stamp != wantStamp {
			for _, s := range l.segmentList() {
				t.Logf("segment %d max %d: offsets %v times %v", s.baseOffset, s.maxTimestamp.Load(), s.offsets.Entries(), s.times.Entries())
			}
			for _, b := range batches {
				t.Logf("batch [%d,%d] max %d size %d", b.base, b.last, b.maxTimestamp, b.size())
			}
			t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v, %v; want %d, %d, %v", ts, offset, stamp, found, err, wantOffset, wantStamp, wantFound)
		}
	}
	probe(lo - 1)
	probe(hi)
	probe(hi + 1)
	for _, b := range batches {
		if rng.IntN(4) == 0 {
			probe(b.maxTimestamp)
		}
	}
	for i := 0; i < n; i++ {
		probe(lo - 10 + rng.Int64N(hi-lo+20))
	}
}

// logLines records what a log reports through Config.Logger, as text lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *logLines) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *logLines) logger() *slog.Logger { return slog.New(slog.NewTextHandler(r, nil)) }

// matching returns the recorded lines holding every one of words.
func (r *logLines) matching(words ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, line := range strings.Split(r.buf.String(), "\n") {
		all := line != ""
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}
