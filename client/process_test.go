package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/localcluster"
)

var (
	buildOnce     sync.Once
	sluicedBinary string
	buildErr      error
	servingLine   = regexp.MustCompile(`msg="broker serving" listen=(\S+)`)
)

// TestMain removes the sluiced binary buildSluiced may have built.
func TestMain(m *testing.M) {
	code := m.Run()
	if sluicedBinary != "" {
		os.RemoveAll(filepath.Dir(sluicedBinary))
	}
	os.Exit(code)
}

// buildSluiced builds cmd/sluiced once per test binary run.
func buildSluiced(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "client-sluiced-")
		if err != nil {
			buildErr = err
			return
		}
		sluicedBinary = filepath.Join(dir, "sluiced")
		out, err := exec.Command("go", "build", "-o", sluicedBinary, "../cmd/sluiced").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build sluiced: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return sluicedBinary
}

// freePort returns a port that was free a moment ago, so that a restarted broker can reuse it;
// from below the ephemeral range, where no outgoing connection takes it while the broker is down.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// sluiced is a running daemon.
type sluiced struct {
	cmd    *exec.Cmd
	exited chan error
}

// startSluiced starts the daemon on address with dataDir and waits until it serves.
func startSluiced(t *testing.T, dataDir, address string) *sluiced {
	t.Helper()
	cmd := exec.Command(buildSluiced(t), "--data-dir", dataDir, "--listen", address, "--http", "127.0.0.1:0", "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &sluiced{cmd: cmd, exited: make(chan error, 1)}
	serving := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stderr)
		signalled := false
		for scanner.Scan() {
			if !signalled && servingLine.MatchString(scanner.Text()) {
				signalled = true
				close(serving)
			}
		}
		io.Copy(io.Discard, stderr)
		d.exited <- cmd.Wait()
	}()
	select {
	case <-serving:
	case err := <-d.exited:
		t.Fatalf("sluiced exited before serving: %v", err)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("sluiced did not start serving")
	}
	t.Cleanup(d.kill)
	return d
}

func (d *sluiced) kill() {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// TestBrokerKilledMidProduce kills sluiced with SIGKILL while the producer writes with acks=all,
// restarts it on the same data dir and port, and checks that the producer carries on by itself
// (every record produced is finally acknowledged) and that every acknowledged record is stored at
// the offset it was acknowledged with.
func TestBrokerKilledMidProduce(t *testing.T) {
	dataDir := t.TempDir()
	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	daemon := startSluiced(t, dataDir, address)
	c := newClient(t, address)
	createTopic(t, c, "durable", 4)
	p := newProducer(t, c, client.WithAcks(client.AcksAll), client.WithLinger(time.Millisecond),
		client.WithRetryBackoff(20*time.Millisecond, 500*time.Millisecond))

	type ack struct {
		partition int32
		offset    int64
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	var failures []error
	var milestone int
	var milestoneReached chan struct{}
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	ctx, stopProducing := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			value := strconv.Itoa(i)
			err := p.Produce(ctx, &client.Record{Topic: "durable", Key: []byte(value), Value: []byte(value)}, func(r *client.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, err)
					return
				}
				acked[value] = ack{r.Partition, r.Offset}
				if milestoneReached != nil && len(acked) >= milestone {
					close(milestoneReached)
					milestoneReached = nil
				}
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("produce: %v", err)
				return
			}
		}
	}()
	// waitFor waits until acknowledgements reach target; the callback closes reached.
	waitFor := func(what string, target int) {
		t.Helper()
		mu.Lock()
		reached := make(chan struct{})
		if len(acked) >= target {
			close(reached)
		} else {
			milestone, milestoneReached = target, reached
		}
		mu.Unlock()
		select {
		case <-reached:
		case <-time.After(90 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	waitFor("20,000 acknowledgements", 20_000)
	daemon.kill()
	beforeRestart := ackedCount()
	startSluiced(t, dataDir, address)
	waitFor("20,000 more acknowledgements after the restart", beforeRestart+20_000)
	stopProducing()
	wg.Wait()
	flushCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.Flush(flushCtx); err != nil {
		t.Fatalf("flush after restart: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failures), failures[0])
	}

	ends, err := client.NewAdmin(c).ListOffsets(flushCtx, "durable", client.AtEnd())
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, end := range ends {
		total += int(end.Offset)
	}
	consumer := newConsumer(t, c)
	assignAll(t, consumer, "durable", 4, client.AtStart())
	stored := map[ack]string{}
	for _, r := range pollN(t, consumer, total) {
		stored[ack{r.Partition, r.Offset}] = string(r.Value)
	}
	for value, a := range acked {
		if stored[a] != value {
			t.Fatalf("record %s acknowledged at %d/%d, found %q there", value, a.partition, a.offset, stored[a])
		}
	}
	t.Logf("%d acknowledged (%d before the kill), all at their offsets; %d stored (duplicates from retried unanswered batches: %d)",
		len(acked), beforeRestart, total, total-len(acked))
}
