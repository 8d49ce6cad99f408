package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatMember is one `kcat -G` balanced consumer process.
type kcatMember struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// kcatGroup tracks what the kcat members of one group print: consumed (partition, offset) pairs
// and each member's current assignment.
type kcatGroup struct {
	mu       sync.Mutex
	consumed map[[2]int64][]string // (partition, offset) -> members that printed it
	assigned map[string][]int32
	changed  chan struct{}
}

var assignedLine = regexp.MustCompile(`rebalanced \(.*\): assigned: (.*)$`)
var partitionInLine = regexp.MustCompile(`\[(\d+)\]`)

func (g *kcatGroup) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *kcatGroup) await(t *testing.T, ctx context.Context, what string, condition func() bool) {
	t.Helper()
	for {
		g.mu.Lock()
		ok, changed := condition(), g.changed
		g.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			g.mu.Lock()
			defer g.mu.Unlock()
			t.Fatalf("%s: gave up; assignments %v, %d records consumed", what, g.assigned, len(g.consumed))
		}
	}
}

func (g *kcatGroup) start(t *testing.T, broker, groupID, topic, name string) *kcatMember {
	t.Helper()
	cmd := exec.Command("kcat", "-u", "-b", broker, "-G", groupID, topic, "-f", "%p %o\\n",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300", "-X", "auto.offset.reset=earliest",
		"-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=200", "-X", "partition.assignment.strategy=range")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &kcatMember{name: name, cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-m.done
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			var partition, offset int64
			if _, err := fmt.Sscanf(scanner.Text(), "%d %d", &partition, &offset); err != nil {
				continue
			}
			g.mu.Lock()
			g.consumed[[2]int64{partition, offset}] = append(g.consumed[[2]int64{partition, offset}], name)
			g.notifyLocked()
			g.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			line := scanner.Text()
			match := assignedLine.FindStringSubmatch(line)
			if match == nil {
				continue
			}
			var partitions []int32
			for _, p := range partitionInLine.FindAllStringSubmatch(match[1], -1) {
				n, _ := strconv.Atoi(p[1])
				partitions = append(partitions, int32(n))
			}
			g.mu.Lock()
			g.assigned[name] = partitions
			g.notifyLocked()
			g.mu.Unlock()
		}
	}()
	go func() {
		wg.Wait()
		cmd.Wait()
		g.mu.Lock()
		delete(g.assigned, name)
		g.notifyLocked()
		g.mu.Unlock()
		close(m.done)
	}()
	return m
}

// coversOnce reports whether the live members' assignments cover partitions 0..n-1 exactly once.
func (g *kcatGroup) coversOnceLocked(n int, members ...string) bool {
	count := map[int32]int{}
	for _, name := range members {
		for _, p := range g.assigned[name] {
			count[p]++
		}
	}
	if len(count) != n {
		return false
	}
	for _, c := range count {
		if c != 1 {
			return false
		}
	}
	return true
}

// produceRound produces perPartition records to each partition of topic, and returns nothing until
// all are acknowledged.
func produceRound(t *testing.T, client *kgo.Client, topic string, partitions int32, perPartition int) {
	t.Helper()
	var records []*kgo.Record
	for p := range partitions {
		for i := range perPartition {
			records = append(records, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	if err := client.ProduceSync(context.Background(), records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committed returns the group's committed offsets by partition.
func committed(t *testing.T, client *kgo.Client, groupID, topic string) map[int32]int64 {
	t.Helper()
	out, err := fetchCommitted(client, groupID, topic)
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		return map[int32]int64{} // the group's error (e.g. its coordinator moving): nothing committed yet
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGroupKcatBalanced runs three `kcat -G` members (librdkafka) on a 6-partition topic: every
// partition goes to exactly one member; a member killed with SIGKILL loses its partitions to the
// others within the session timeout; and after the clean rebalance caused by a fourth member,
// nothing committed before it is consumed again.
func TestGroupKcatBalanced(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat); .ci/run installs it")
	}
	d := startDaemon(t, t.TempDir())
	client := newClient(t, d.kafka, kgo.ProducerLinger(time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, client, "balanced", 6)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	g := &kcatGroup{consumed: map[[2]int64][]string{}, assigned: map[string][]int32{}, changed: make(chan struct{})}
	members := map[string]*kcatMember{}
	for _, name := range []string{"a", "b", "c"} {
		members[name] = g.start(t, d.kafka, "kcat-group", "balanced", name)
	}
	g.await(t, ctx, "three members share 6 partitions", func() bool {
		return g.coversOnceLocked(6, "a", "b", "c") && len(g.assigned["a"]) == 2 && len(g.assigned["b"]) == 2 && len(g.assigned["c"]) == 2
	})
	produceRound(t, client, "balanced", 6, 500)
	g.await(t, ctx, "round 1 consumed", func() bool { return len(g.consumed) == 3000 })
	for {
		offsets := committed(t, client, "kcat-group", "balanced")
		done := len(offsets) == 6
		for _, o := range offsets {
			done = done && o == 500
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("auto-commits never reached 500: %v", offsets)
		case <-time.After(50 * time.Millisecond): // polling the broker: there is nothing to wait on
		}
	}

	// SIGKILL one member: no LeaveGroup, so the session timeout (6 s) removes it.
	g.mu.Lock()
	victimPartitions := g.assigned["c"]
	g.mu.Unlock()
	killed := time.Now()
	members["c"].cmd.Process.Signal(syscall.SIGKILL)
	<-members["c"].done
	g.await(t, ctx, "c's partitions move", func() bool { return g.coversOnceLocked(6, "a", "b") })
	moved := time.Since(killed)
	t.Logf("partitions %v of the killed member moved to the others %v after SIGKILL (session timeout 6s)", victimPartitions, moved.Round(time.Millisecond))
	if moved > 12*time.Second {
		t.Errorf("partitions moved %v after the kill, want about the 6 s session timeout", moved)
	}
	produceRound(t, client, "balanced", 6, 500)
	g.await(t, ctx, "round 2 consumed", func() bool { return len(g.consumed) == 6000 })

	// A clean rebalance: a fourth member joins.
	members["d"] = g.start(t, d.kafka, "kcat-group", "balanced", "d")
	g.await(t, ctx, "d joins", func() bool { return len(g.assigned["d"]) > 0 && g.coversOnceLocked(6, "a", "b", "d") })
	produceRound(t, client, "balanced", 6, 500)
	g.await(t, ctx, "round 3 consumed", func() bool { return len(g.consumed) == 9000 })

	g.mu.Lock()
	defer g.mu.Unlock()
	for at, by := range g.consumed {
		if len(by) > 1 {
			t.Errorf("partition %d offset %d consumed %d times (by %v): it was committed before the rebalance", at[0], at[1], len(by), by)
		}
	}
}

// TestGroupOffsetsSurviveKill commits offsets for two groups on one topic, kills sluiced with
// SIGKILL, restarts it on the same data directory and finds both groups' offsets; each group then
// resumes from its own position and sees every later record.
func TestGroupOffsetsSurviveKill(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	client := newClient(t, d.kafka, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, client, "positions", 4)
	produceRound(t, client, "positions", 4, 1000)

	consume := func(address, groupID string, want int) int {
		t.Helper()
		consumer := newClient(t, address, kgo.ConsumerGroup(groupID), kgo.ConsumeTopics("positions"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		got := 0
		for got < want {
			fetches := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s: consumed %d of %d", groupID, got, want)
			}
			got += fetches.NumRecords()
		}
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		consumer.Close()
		return got
	}
	if got := consume(d.kafka, "first", 4000); got != 4000 {
		t.Fatalf("first group consumed %d", got)
	}
	if got := consume(d.kafka, "second", 4000); got != 4000 {
		t.Fatalf("second group consumed %d", got)
	}
	want := committed(t, client, "first", "positions")
	if len(want) != 4 || want[0] != 1000 {
		t.Fatalf("committed before the kill: %v", want)
	}
	d.kill()

	d = startDaemon(t, dataDir)
	client = newClient(t, d.kafka, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, groupID := range []string{"first", "second"} {
		if got := committed(t, client, groupID, "positions"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s after kill -9 and restart: %v, want %v", groupID, got, want)
		}
	}
	produceRound(t, client, "positions", 4, 10)
	for _, groupID := range []string{"first", "second"} {
		if got := consume(d.kafka, groupID, 40); got != 40 {
			t.Fatalf("%s resumed with %d records, want the 40 new ones", groupID, got)
		}
	}
}
