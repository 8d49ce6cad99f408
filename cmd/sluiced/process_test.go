package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sluicedBinary is built once per test run by TestMain.
var sluicedBinary string

func TestMain(m *testing.M) {
	if spec := os.Getenv(etlMemberEnv); spec != "" {
		os.Exit(runETLMember(spec)) // a member process of TestTransactionalETLFranzGroupSession
	}
	dir, err := os.MkdirTemp("", "sluiced-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sluicedBinary = filepath.Join(dir, "sluiced")
	build := exec.Command("go", "build", "-o", sluicedBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sluiced:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a running sluiced process.
type daemon struct {
	t       testing.TB
	dataDir string
	cmd     *exec.Cmd
	kafka   string // host:port of the Kafka listener
	http    string // host:port of the HTTP listener
	exited  chan error
	logMu   sync.Mutex
	log     strings.Builder
}

var (
	servingLine = regexp.MustCompile(`msg="broker serving" listen=(\S+)`)
	httpLine    = regexp.MustCompile(`msg="http serving" address=(\S+)`)
)

// startDaemon starts sluiced on ephemeral ports with dataDir and waits until it serves.
func startDaemon(t testing.TB, dataDir string, extraArgs ...string) *daemon {
	t.Helper()
	args := append([]string{"--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "info"}, extraArgs...)
	d := &daemon{t: t, dataDir: dataDir, cmd: exec.Command(sluicedBinary, args...), exited: make(chan error, 1)}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stderr)
		signalled := false
		for scanner.Scan() {
			line := scanner.Text()
			d.logMu.Lock()
			d.log.WriteString(line + "\n")
			if m := httpLine.FindStringSubmatch(line); m != nil {
				d.http = m[1]
			}
			if m := servingLine.FindStringSubmatch(line); m != nil && !signalled {
				d.kafka = m[1]
				signalled = true
				close(found)
			}
			d.logMu.Unlock()
		}
		io.Copy(io.Discard, stderr)
		d.exited <- d.cmd.Wait()
	}()
	select {
	case <-found:
	case err := <-d.exited:
		t.Fatalf("sluiced exited before serving: %v\n%s", err, d.logs())
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		t.Fatalf("sluiced did not start serving\n%s", d.logs())
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.kill()
		}
	})
	return d
}

func (d *daemon) logs() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.log.String()
}

// kill sends SIGKILL and waits for the process to go.
func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Fatalf("sluiced exited with %v\n%s", err, d.logs())
		}
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		d.t.Fatalf("sluiced did not stop on SIGTERM\n%s", d.logs())
	}
}

// metric scrapes /metrics and returns the value of the first sample whose line starts with name.
func (d *daemon) metric(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.http+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return ""
}
