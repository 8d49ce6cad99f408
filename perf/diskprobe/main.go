// Command diskprobe measures what a disk gives sluice's partition logs when every append waits
// for its fsync, as an acks=all produce does on each replica under the default --replica-ack=fsync.
// It opens -logs segment.Logs in a temporary folder under -dir, appends batches of 100-byte records
// to each at its share of -rate, and has every append wait for the log's group commit (one
// fdatasync covers every append before it). It reports the append-to-durable latency, the
// fdatasync latency and how many fdatasyncs ran.
//
//	go run ./perf/diskprobe -dir data -logs 24 -rate 120 -duration 60s
//	go run ./perf/diskprobe -dir data -logs 3 -rate 120 -duration 60s
//
// The two runs write the same bytes per second; the first as a three-node cluster on one machine
// does with eight partitions of three replicas, the second as one log per node would. Nothing here
// goes through the network, so what it reports is the disk's and the log's share of an acks=all
// latency. A busy or shared disk needs a long run: its tail often shows only after tens of seconds.
//
// With -raw the logs are plain files instead (raw.go): the same batches written with pwrite and
// made durable by a group-commit fdatasync per file, none of segment.Log's indexes, writebacks or
// page-cache drops. Run it beside the same probe without -raw, interleaved, to tell the disk's part
// from the log's: a virtual disk's latency can double from one minute to the next.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/batch"
	"github.com/sluice-mq/sluice/segment"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "folder to create the probe's logs under (on the disk to measure); removed afterwards")
	logs := flag.Int("logs", 24, "number of partition logs appending at once")
	rate := flag.Float64("rate", 120, "MB/s written over all logs")
	batchBytes := flag.Int("batch", 16<<10, "bytes per appended batch")
	duration := flag.Duration("duration", 30*time.Second, "how long to append")
	cfg := segment.DefaultConfig()
	flag.Int64Var(&cfg.WritebackBytes, "writeback-bytes", cfg.WritebackBytes, "segment.Config.WritebackBytes: bytes appended between the log's own writebacks (0: none)")
	flag.Int64Var(&cfg.PreallocateStep, "preallocate-step", cfg.PreallocateStep, "segment.Config.PreallocateStep: the largest fallocate step (0: the whole segment at its first append)")
	flag.Int64Var(&cfg.TailCacheBytes, "tail-cache-bytes", cfg.TailCacheBytes, "page cache each log keeps behind its clean end (sluiced --log-tail-cache-bytes)")
	raw := flag.Bool("raw", false, "plain preallocated files, pwrite and a group-commit fdatasync per file, instead of segment.Logs: the disk's floor")
	flag.Parse()
	if *logs < 1 || *rate <= 0 || *batchBytes < 200 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "diskprobe: -logs >= 1, -rate > 0, -batch >= 200 and -duration > 0 are required")
		os.Exit(2)
	}
	root, err := os.MkdirTemp(*dir, "diskprobe-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "diskprobe:", err)
		os.Exit(1)
	}
	run := probe
	if *raw {
		run = probeRaw
	}
	result, err := run(root, cfg, *logs, *rate*1e6, *batchBytes, *duration)
	err = errors.Join(err, os.RemoveAll(root)) // before any exit: os.Exit runs no deferred call
	if err != nil {
		fmt.Fprintln(os.Stderr, "diskprobe:", err)
		os.Exit(1)
	}
	result.print(os.Stdout, *logs, *duration)
}

// outcome is what a probe measured. Each log records into an outcome of its own (mu is taken by
// its appender and its flusher only), merged at the end: with one shared lock, an execution trace
// showed the 24 appenders of a run queued on it for up to 130 ms, and a probe must add no waits of
// its own.
type outcome struct {
	mu      sync.Mutex
	appends int
	durable []time.Duration // append call to durable, one per append that became durable
	fsyncs  []time.Duration // one per group-commit fdatasync
	bytes   int64           // of the appends that became durable
}

// probe appends to logs segment.Logs (configured as cfg) under root at bytesPerSecond in total for duration.
func probe(root string, cfg segment.Config, logs int, bytesPerSecond float64, batchBytes int, duration time.Duration) (*outcome, error) {
	cfg.Flush = segment.FlushByOS // the waits below ask for each fsync, as acks=all does
	cfg.FlushYield = false        // as the broker sets it: its appenders are remote
	interval := time.Duration(float64(time.Second) * float64(batchBytes) * float64(logs) / bytesPerSecond)
	opened := make([]*segment.Log, 0, logs)
	results := make([]*outcome, logs)
	for i := range logs {
		result := &outcome{}
		results[i] = result
		cfg := cfg
		cfg.ObserveFsync = func(d time.Duration) {
			result.mu.Lock()
			result.fsyncs = append(result.fsyncs, d)
			result.mu.Unlock()
		}
		log, err := segment.Open(filepath.Join(root, fmt.Sprintf("probe-%d", i)), cfg)
		if err != nil {
			for _, log := range opened {
				err = errors.Join(err, log.Close())
			}
			return nil, err
		}
		opened = append(opened, log)
	}
	stop := time.Now().Add(duration)
	errs := make(chan error, logs)
	var wg sync.WaitGroup
	for i, log := range opened {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- errors.Join(appendUntil(log, batchBytes, interval, stop, results[i]), log.Close())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return merge(results), nil
}

// merge returns the outcomes of the logs as one.
func merge(parts []*outcome) *outcome {
	all := &outcome{}
	for _, part := range parts {
		all.appends += part.appends
		all.durable = append(all.durable, part.durable...)
		all.fsyncs = append(all.fsyncs, part.fsyncs...)
		all.bytes += part.bytes
	}
	return all
}

// appendUntil appends one batch every interval until stop, each append waiting (on the flusher's
// goroutine, so that appends keep their pace) for its fsync. It returns once every wait is over.
func appendUntil(log *segment.Log, batchBytes int, interval time.Duration, stop time.Time, result *outcome) error {
	var pending sync.WaitGroup
	var failure error
	var failureMu sync.Mutex
	// One batch, built once: Append only rewrites its base offset and leader epoch, which the CRC
	// does not cover, so the probe's CPU goes to the log, not to encoding.
	template := probeBatch(batchBytes)
	raw := make([]byte, len(template))
	next := time.Now()
	for time.Now().Before(stop) {
		copy(raw, template)
		started := time.Now()
		appended, err := log.Append(raw, 0)
		if err != nil {
			return fmt.Errorf("diskprobe: append to %s: %w", log.Dir(), err)
		}
		result.mu.Lock()
		result.appends++
		result.mu.Unlock()
		pending.Add(1)
		log.NotifyFlushed(appended.LastOffset, func(err error) {
			defer pending.Done()
			if err != nil {
				failureMu.Lock()
				failure = err
				failureMu.Unlock()
				return
			}
			result.mu.Lock()
			result.durable = append(result.durable, time.Since(started))
			result.bytes += int64(len(template))
			result.mu.Unlock()
		})
		next = next.Add(interval)
		time.Sleep(time.Until(next))
	}
	pending.Wait()
	return failure
}

// probeBatch returns a record batch of 100-byte values of at most batchBytes.
func probeBatch(batchBytes int) []byte {
	value := make([]byte, 100)
	var b batch.Builder
	b.ProducerID = -1
	b.Reset(time.Now())
	for b.Size()+len(value) < batchBytes {
		b.Add(batch.Record{Value: value})
	}
	return b.Finish()
}

// quantile returns the q-quantile (0 <= q <= 1) of sorted durations, 0 for none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

func (o *outcome) print(w io.Writer, logs int, duration time.Duration) {
	slices.Sort(o.durable)
	slices.Sort(o.fsyncs)
	fmt.Fprintf(w, "%d logs, %.1f MB/s written, %d appends, %d fdatasyncs (%.0f/s)\n",
		logs, float64(o.bytes)/duration.Seconds()/1e6, o.appends, len(o.fsyncs), float64(len(o.fsyncs))/duration.Seconds())
	for _, row := range []struct {
		name   string
		sorted []time.Duration
	}{{"append to durable", o.durable}, {"fdatasync", o.fsyncs}} {
		fmt.Fprintf(w, "%-18s p50 %8.3f ms  p90 %8.3f ms  p99 %8.3f ms  max %8.3f ms\n", row.name,
			ms(quantile(row.sorted, 0.5)), ms(quantile(row.sorted, 0.9)), ms(quantile(row.sorted, 0.99)), ms(quantile(row.sorted, 1)))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
