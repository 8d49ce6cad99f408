package broker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// victimEnv, when set in the environment, turns TestKIP848VictimProcess into the killed member of
// TestConsumerGroupKIP848MemberKilled: a franz-go KIP-848 consumer in a process of its own.
const victimEnv = "SLUICE_KIP848_VICTIM"

// TestConsumerGroupKIP848MemberKilled: two franz-go KIP-848 members (uniform assignor) in the test
// process and a third in a child process share a topic. The child reads batches and commits them
// when told; a join moves only the partitions the joiner takes (the others' remaining partitions
// are never revoked); then the child is killed with SIGKILL between reading a batch and committing
// it. Its session expires, the survivors take its partitions, and in the end every record was read
// at least once, exactly once among the committed reads, the killed member's uncommitted batch was
// redelivered, and the group's committed offsets reach the end of every partition.
func TestConsumerGroupKIP848MemberKilled(t *testing.T) {
	const total, partitions, group, topic = 60_000, 6, "kip848-kill", "kill848"
	b := startBroker(t, nil)
	admin := dial(t, b)
	admin.createTopic(topic, partitions, nil)
	produceNumbered(t, b, topic, total)
	configs := franzClient(t, b)
	setGroupConfigs(t, configs, group, map[string]string{"consumer.heartbeat.interval.ms": "200", "consumer.session.timeout.ms": "2000"})
	ctx := groupTestContext(t)

	l, gate := newLedger(), newBudget()
	survivor := func() (*groupMember, *ownership) {
		owned := newOwnership()
		m := startMember(t, b, group, topic, l, gate, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
				owned.update(assigned[topic], nil)
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Logf("commit on revoke: %v", err)
				}
				owned.update(nil, revoked[topic])
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
				owned.update(nil, lost[topic])
			}))
		return m, owned
	}

	a, ownedA := survivor()
	ownedA.await(ctx, t, "first member owns every partition", func(owned map[int32]bool, _ []int32) bool { return len(owned) == partitions })
	gate.add(3000)
	l.awaitUnique(ctx, t, 3000)

	v := startVictim(t, b.Addr().String(), group, topic)
	// joinMovesOnlyTaken checks a join: the older member gives up only what the joiner takes.
	joinMovesOnlyTaken := func(name string, before map[int32]bool, revokedFrom int, want int) {
		t.Helper()
		var after map[int32]bool
		var revoked []int32
		ownedA.await(ctx, t, name+": first member down to its share", func(owned map[int32]bool, r []int32) bool {
			after, revoked = owned, r[revokedFrom:]
			return len(owned) == want
		})
		for p := range after {
			if !before[p] || slices.Contains(revoked, p) {
				t.Errorf("%s: partition %d revoked from the first member and given back (revoked %v, owned before %v)", name, p, revoked, before)
			}
		}
		if len(revoked) != len(before)-len(after) {
			t.Errorf("%s: first member had %v, revoked %v, now owns %v: partitions that stayed were stopped", name, before, revoked, after)
		}
	}
	before, revokedSoFar := ownedA.snapshot()
	v.pollCommitted(ctx, t, 500)
	joinMovesOnlyTaken("child joins", before, revokedSoFar, partitions/2)
	gate.add(6000)
	l.awaitUnique(ctx, t, 9000)
	v.pollCommitted(ctx, t, 500)

	before, revokedSoFar = ownedA.snapshot()
	c, ownedC := survivor()
	ownedC.await(ctx, t, "third member gets its share", func(owned map[int32]bool, _ []int32) bool { return len(owned) == partitions/3 })
	joinMovesOnlyTaken("third member joins", before, revokedSoFar, partitions/3)
	gate.add(6000)
	v.pollCommitted(ctx, t, 500)
	v.pollCommitted(ctx, t, 500)
	uncommitted := v.kill(ctx, t, 500)

	// The survivors take over the child's partitions once its session expires.
	gate.add(2 * total)
	committedByChild := v.committedRecords()
	l.awaitUnique(ctx, t, total-len(committedByChild))
	a.stop(t)
	c.stop(t)
	t.Logf("child read %d records in committed batches and %d in the batch it died in", len(committedByChild), len(uncommitted))

	l.mu.Lock()
	for at := range committedByChild {
		if l.seen[at] > 0 {
			t.Errorf("partition %d offset %d: committed by the killed member and read again", at[0], at[1])
		}
	}
	for _, at := range uncommitted {
		if l.seen[at] == 0 {
			t.Errorf("partition %d offset %d: read by the killed member without a commit and never redelivered", at[0], at[1])
		}
	}
	l.mu.Unlock()
	l.check(t, "survivors", total-len(committedByChild), true)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = group
	fetched, err := fetch.RequestWith(ctx, configs)
	if err != nil || fetched.ErrorCode != 0 {
		t.Fatalf("OffsetFetch: %v %+v", err, fetched)
	}
	sum := int64(0)
	for _, tp := range fetched.Topics {
		for _, p := range tp.Partitions {
			sum += p.Offset
		}
	}
	if sum != total {
		t.Errorf("committed offsets sum to %d, want %d (every partition committed to its end): %+v", sum, total, fetched.Topics)
	}
}

// ownership follows one member's partitions through its rebalance callbacks.
type ownership struct {
	mu      sync.Mutex
	owned   map[int32]bool
	revoked []int32 // every partition revoked or lost, in order
	changed chan struct{}
}

func newOwnership() *ownership {
	return &ownership{owned: map[int32]bool{}, changed: make(chan struct{})}
}

func (o *ownership) update(assigned, revoked []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range assigned {
		o.owned[p] = true
	}
	for _, p := range revoked {
		delete(o.owned, p)
		o.revoked = append(o.revoked, p)
	}
	close(o.changed)
	o.changed = make(chan struct{})
}

// snapshot returns the partitions owned and how many revocations happened so far.
func (o *ownership) snapshot() (map[int32]bool, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	owned := map[int32]bool{}
	for p := range o.owned {
		owned[p] = true
	}
	return owned, len(o.revoked)
}

func (o *ownership) await(ctx context.Context, t testing.TB, what string, condition func(owned map[int32]bool, revoked []int32) bool) {
	t.Helper()
	for {
		o.mu.Lock()
		owned := map[int32]bool{}
		for p := range o.owned {
			owned[p] = true
		}
		done, changed := condition(owned, slices.Clone(o.revoked)), o.changed
		o.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			o.mu.Lock()
			defer o.mu.Unlock()
			t.Fatalf("%s: owned %v, revoked %v", what, o.owned, o.revoked)
		}
	}
}

// victim drives the child process: "poll N" makes it read up to N records (reported as "read P O"
// lines, then "polled K"), "commit" makes it commit them (answered "committed").
type victim struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	mu      sync.Mutex
	batches [][][2]int64 // committed batches
}

func startVictim(t *testing.T, addr, group, topic string) *victim {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKIP848VictimProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), victimEnv+"="+strings.Join([]string{addr, group, topic}, ","))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	v := &victim{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		defer close(v.lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			v.lines <- scanner.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return v
}

func (v *victim) command(t testing.TB, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(v.stdin, line); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// next returns the next line that is not a test framework line.
func (v *victim) next(ctx context.Context, t testing.TB) string {
	t.Helper()
	for {
		select {
		case line, ok := <-v.lines:
			if !ok {
				t.Fatal("child: output ended")
			}
			if strings.HasPrefix(line, "read ") || strings.HasPrefix(line, "polled ") || line == "committed" {
				return line
			}
		case <-ctx.Done():
			t.Fatal("child: no answer")
		}
	}
}

// poll has the child read a batch and returns its records.
func (v *victim) poll(ctx context.Context, t testing.TB, n int) [][2]int64 {
	t.Helper()
	v.command(t, "poll "+strconv.Itoa(n))
	var batch [][2]int64
	for {
		line := v.next(ctx, t)
		var p, o int64
		if _, err := fmt.Sscanf(line, "read %d %d", &p, &o); err == nil {
			batch = append(batch, [2]int64{p, o})
			continue
		}
		if !strings.HasPrefix(line, "polled ") {
			t.Fatalf("child: %q, want polled", line)
		}
		return batch
	}
}

func (v *victim) pollCommitted(ctx context.Context, t testing.TB, n int) {
	t.Helper()
	batch := v.poll(ctx, t, n)
	v.command(t, "commit")
	if line := v.next(ctx, t); line != "committed" {
		t.Fatalf("child: %q, want committed", line)
	}
	v.mu.Lock()
	v.batches = append(v.batches, batch)
	v.mu.Unlock()
}

// kill has the child read a batch, then kills it before it commits; it returns the batch.
func (v *victim) kill(ctx context.Context, t testing.TB, n int) [][2]int64 {
	t.Helper()
	batch := v.poll(ctx, t, n)
	if err := v.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = v.cmd.Wait()
	return batch
}

func (v *victim) committedRecords() map[[2]int64]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	records := map[[2]int64]bool{}
	for _, batch := range v.batches {
		for _, at := range batch {
			records[at] = true
		}
	}
	return records
}

// TestKIP848VictimProcess is the child process of TestConsumerGroupKIP848MemberKilled; without
// victimEnv it does nothing.
func TestKIP848VictimProcess(t *testing.T) {
	spec := os.Getenv(victimEnv)
	if spec == "" {
		t.Skip("runs only as the child of TestConsumerGroupKIP848MemberKilled")
	}
	parts := strings.Split(spec, ",")
	addr, group, topic := parts[0], parts[1], parts[2]
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.HeartbeatInterval(200*time.Millisecond), kgo.SessionTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	out := bufio.NewWriter(os.Stdout)
	commands := bufio.NewScanner(os.Stdin)
	var polled []*kgo.Record
	for commands.Scan() {
		command := commands.Text()
		switch {
		case strings.HasPrefix(command, "poll "):
			n, _ := strconv.Atoi(strings.TrimPrefix(command, "poll "))
			polled = nil
			for len(polled) == 0 {
				client.AllowRebalance()
				ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
				polled = client.PollRecords(ctx, n).Records()
				cancel()
			}
			for _, r := range polled {
				fmt.Fprintf(out, "read %d %d\n", r.Partition, r.Offset)
			}
			fmt.Fprintf(out, "polled %d\n", len(polled))
		case command == "commit":
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := client.CommitRecords(ctx, polled...); err != nil {
				t.Fatalf("commit: %v", err)
			}
			cancel()
			client.AllowRebalance()
			fmt.Fprintln(out, "committed")
		}
		if err := out.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}
