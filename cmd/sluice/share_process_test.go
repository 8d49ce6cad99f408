package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareLedger records every delivery of every record (by value) to share-group workers.
type shareLedger struct {
	mu      sync.Mutex
	first   map[string]time.Time
	workers map[string][]string    // value -> workers it was delivered to
	times   map[string][]time.Time // value -> when
	counts  map[string][]int32     // value -> delivery count reported to a franz-go worker (0: a CLI worker)
	changed chan struct{}
}

func newShareLedger() *shareLedger {
	return &shareLedger{first: map[string]time.Time{}, workers: map[string][]string{}, times: map[string][]time.Time{}, counts: map[string][]int32{}, changed: make(chan struct{})}
}

func (l *shareLedger) add(worker, value string, deliveryCount int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.first[value]; !ok {
		l.first[value] = time.Now()
	}
	l.workers[value] = append(l.workers[value], worker)
	l.times[value] = append(l.times[value], time.Now())
	l.counts[value] = append(l.counts[value], deliveryCount)
	close(l.changed)
	l.changed = make(chan struct{})
}

// historyLocked describes every delivery of value: worker, delivery count (franz-go workers only)
// and time since start.
func (l *shareLedger) historyLocked(value string, start time.Time) []string {
	var h []string
	for i, w := range l.workers[value] {
		h = append(h, fmt.Sprintf("%s#%d@%v", w, l.counts[value][i], l.times[value][i].Sub(start).Round(time.Millisecond)))
	}
	return h
}

// await waits until n distinct records were delivered.
func (l *shareLedger) await(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		got, changed := len(l.first), l.changed
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%d distinct records delivered, waited for %d", got, n)
		}
	}
}

// cliShareWorker runs "sluice consume --share-group" and feeds what it prints to the ledger.
type cliShareWorker struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

func startCLIShareWorker(t *testing.T, brokers, name string, l *shareLedger) *cliShareWorker {
	t.Helper()
	cmd := exec.Command(sluiceBinary, "consume", "jobs", "--share-group", "workers")
	cmd.Env = append(os.Environ(), "SLUICE_BROKERS="+brokers)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr // a worker that fails says why
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &cliShareWorker{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		defer close(w.exited)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			l.add(name, scanner.Text(), 0)
		}
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-w.exited
		}
	})
	return w
}

// sluicedAt is a sluiced with a fixed data directory and ports, so that it can be restarted.
type sluicedAt struct {
	dir, listen, raft string
	cmd               *exec.Cmd
	exited            chan struct{}
}

func (s *sluicedAt) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(sluicedBinary, "--data-dir", s.dir, "--listen", s.listen, "--http", "", "--raft-listen", s.raft,
		"--segment-bytes", "16777216")
	waitForLine(t, s.cmd, servingLine)
}

// stop sends SIGTERM and waits until the process is gone (waitForLine's goroutine reaps it).
func (s *sluicedAt) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(s.cmd.Process.Pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("sluiced did not stop within 30 s of SIGTERM")
		}
		time.Sleep(10 * time.Millisecond) // polling for the exit; nothing to wait on here
	}
}

// TestShareGroupTwentyWorkersAcceptance: 20 share-group workers, ten `sluice consume
// --share-group` processes (this repo's client) and ten franz-go consumers, split 200,000 records
// of a 2-partition topic. Three CLI workers are killed (SIGKILL) mid-stream and the broker is
// restarted half-way; in the end every record was delivered, the group has nothing in flight or
// waiting (every record acknowledged: none was delivered often enough to be archived), and records
// delivered twice are only those a killed worker held or that were in flight across the restart.
func TestShareGroupTwentyWorkersAcceptance(t *testing.T) {
	const total = 200_000
	s := &sluicedAt{dir: t.TempDir(), listen: closedPort(t), raft: closedPort(t)}
	s.start(t)
	brokers := s.listen
	ok(t, brokers, nil, "topic", "create", "jobs", "--partitions", "2")
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	resource := kmsg.NewIncrementalAlterConfigsRequestResource()
	resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "workers"
	for key, value := range map[string]string{"share.auto.offset.reset": "earliest"} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = key, kmsg.StringPtr(value)
		resource.Configs = append(resource.Configs, c)
	}
	alter.Resources = append(alter.Resources, resource)
	if resp, err := alter.RequestWith(ctx, admin); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group configs: %v %+v", err, resp)
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic("jobs"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var produceErr error
	var wg sync.WaitGroup
	var produceMu sync.Mutex
	for i := range total {
		wg.Add(1)
		producer.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				produceMu.Lock()
				produceErr = err
				produceMu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	producer.Close()
	if produceErr != nil {
		t.Fatal(produceErr)
	}

	l := newShareLedger()
	started := time.Now()
	var cli []*cliShareWorker
	for i := range 10 {
		cli = append(cli, startCLIShareWorker(t, brokers, "cli-"+strconv.Itoa(i), l))
	}
	for i := range 10 {
		name := "franz-" + strconv.Itoa(i)
		client, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
		if err != nil {
			t.Fatal(err)
		}
		pollCtx, stopPolling := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for pollCtx.Err() == nil {
				client.PollRecords(pollCtx, 500).EachRecord(func(r *kgo.Record) {
					l.add(name, string(r.Value), r.DeliveryCount())
					r.Ack(kgo.AckAccept)
				})
			}
		}()
		t.Cleanup(func() { stopPolling(); <-done; client.Close() })
	}

	l.await(t, ctx, total/5)
	killedAt := time.Now()
	killed := map[string]bool{}
	for _, w := range cli[:3] {
		w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.exited
		killed[w.name] = true
	}
	l.await(t, ctx, total/2)
	s.stop(t)
	restartedAt := time.Now()
	s.start(t)
	restartTook := time.Since(restartedAt)
	l.await(t, ctx, total)
	allDelivered := time.Since(started)

	// The group ends with nothing in flight and nothing waiting.
	var described shareGroupOutput
	for {
		r := ok(t, brokers, nil, "group", "describe", "workers", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &described); err != nil {
			t.Fatalf("group describe --json: %v\n%s", err, r.stdout)
		}
		var starts int64
		for _, p := range described.Partitions {
			starts += p.StartOffset
		}
		// The 17 live workers are members again (after the restart each rejoins at its next
		// heartbeat), and nothing is left.
		if described.TotalLag == 0 && starts == total && len(described.Members) == 17 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("share group never caught up: %+v", described)
		case <-time.After(50 * time.Millisecond): // the last acknowledgements reach the broker asynchronously
		}
	}
	if described.Type != "share" {
		t.Errorf("group describe: type %q, want share", described.Type)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	again, afterKill, overLimit, perWorker := 0, 0, 0, map[string]int{}
	slow := map[string]int{}
	var redeliveryDelay time.Duration
	countHistogram := map[int32]int{} // delivery counts the broker reported to franz-go workers
	for value, workers := range l.workers {
		for i, w := range workers {
			perWorker[w]++
			if c := l.counts[value][i]; c > 0 {
				countHistogram[c]++
			}
		}
		if len(workers) >= 5 {
			if overLimit++; overLimit <= 5 {
				t.Errorf("record %s delivered %d times (the delivery limit archives it): %v (killed at %v, restarted at %v)",
					value, len(workers), l.historyLocked(value, started), killedAt.Sub(started).Round(time.Millisecond), restartedAt.Sub(started).Round(time.Millisecond))
			}
		}
		for i := 1; i < len(workers); i++ {
			// A redelivery this late means a lock ran out (30 s) or a member's session
			// lapsed, rather than a kill, a restart or a release handing the record on.
			if l.times[value][i].Sub(l.times[value][i-1]) > 5*time.Second {
				holder := fmt.Sprintf("%s@%v", workers[i-1], l.times[value][i-1].Sub(started).Truncate(time.Second))
				if slow[holder]++; slow[holder] == 1 {
					t.Logf("record %s redelivered more than 5 s after a delivery: %v", value, l.historyLocked(value, started))
				}
			}
		}
		if len(workers) > 1 {
			again++
			if killed[workers[0]] {
				afterKill++
				if d := l.times[value][1].Sub(killedAt); d > redeliveryDelay {
					redeliveryDelay = d
				}
			}
		}
	}
	t.Logf("20 workers: %d records delivered in %v including a broker restart of %v (%.0f records/s); %d delivered more than once, %d of them first held by the 3 killed workers",
		total, allDelivered.Round(time.Millisecond), restartTook.Round(time.Millisecond), float64(total)/allDelivered.Seconds(), again, afterKill)
	if overLimit > 0 {
		t.Errorf("%d records delivered 5 times or more", overLimit)
	}
	t.Logf("per worker: %v; delivery counts reported to franz-go workers: %v", perWorker, countHistogram)
	t.Logf("records redelivered more than 5 s later, by first holder@second: %v (killed at %v, restarted at %v)",
		slow, killedAt.Sub(started).Round(time.Millisecond), restartedAt.Sub(started).Round(time.Millisecond))
	t.Logf("records held by the killed workers were delivered again at most %v after the kill", redeliveryDelay.Round(time.Millisecond))
}

// TestShareGroupRedeliveryAfterWorkerKill: a `sluice consume --share-group` worker that holds
// records (blocked writing them to a stdout nobody reads) is killed; its connection closes and the
// broker releases its records at once, long before their 30 s locks would end: another worker
// gets them (delivery count 2) promptly.
func TestShareGroupRedeliveryAfterWorkerKill(t *testing.T) {
	brokers := startSluiced(t)
	ok(t, brokers, nil, "topic", "create", "jobs", "--partitions", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	const total = 2000
	value := make([]byte, 1024)
	var records []*kgo.Record
	for i := range total {
		v := append([]byte(strconv.Itoa(i)+" "), value...)
		records = append(records, &kgo.Record{Value: v})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	producer.Close()

	// The held worker: its stdout is a pipe the test never reads, so it blocks mid-batch.
	held := exec.Command(sluiceBinary, "consume", "jobs", "--share-group", "workers", "--from-beginning")
	held.Env = append(os.Environ(), "SLUICE_BROKERS="+brokers)
	stdout, err := held.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	defer held.Wait()
	defer held.Process.Kill()
	first := make([]byte, 1)
	if _, err := stdout.Read(first); err != nil { // it acquired records and started writing them
		t.Fatal(err)
	}

	type delivery struct {
		count int32
		at    time.Time
	}
	var mu sync.Mutex
	got := map[string]delivery{}
	changed := make(chan struct{}, 1)
	other, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	pollCtx, stopPolling := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pollCtx.Err() == nil {
			other.PollRecords(pollCtx, 500).EachRecord(func(r *kgo.Record) {
				mu.Lock()
				got[string(r.Value[:bytesIndex(r.Value, ' ')])] = delivery{r.DeliveryCount(), time.Now()}
				mu.Unlock()
				r.Ack(kgo.AckAccept)
				select {
				case changed <- struct{}{}:
				default:
				}
			})
		}
	}()
	defer func() { stopPolling(); <-done }()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	// The other worker takes everything the held one does not hold, then runs dry.
	for last := -1; ; {
		select {
		case <-changed:
			continue
		case <-time.After(2 * time.Second): // no delivery for 2 s: the rest is held
		case <-ctx.Done():
			t.Fatal("the other worker never ran dry")
		}
		if n := count(); n == last {
			break
		} else {
			last = n
		}
	}
	heldCount := total - count()
	if heldCount == 0 {
		t.Fatal("the held worker holds nothing")
	}
	killedAt := time.Now()
	held.Process.Signal(syscall.SIGKILL)
	for count() < total {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%d of %d records delivered after the kill", count(), total)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var slowest time.Duration
	redelivered := 0
	for _, d := range got {
		if d.count > 1 {
			redelivered++
			slowest = max(slowest, d.at.Sub(killedAt))
		}
	}
	if redelivered != heldCount {
		t.Errorf("%d records came with delivery count 2, the killed worker held %d", redelivered, heldCount)
	}
	if slowest > 15*time.Second {
		t.Errorf("redelivery took %v: the locks (30 s) ran out rather than the kill releasing them", slowest)
	}
	t.Logf("a killed worker held %d records; all were delivered to another worker within %v of the kill", heldCount, slowest.Round(time.Millisecond))
}

func bytesIndex(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return len(b)
}
